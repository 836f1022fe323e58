"""The runtime (`spark.runtime`) with the example user job (`examples/user_job.py`) in-process:
Spark's Kafka source reading exactly the job model's partitions, the partitions an expansion
adds read from their log start by the restarted query (same checkpoint), per-key state kept,
the group ``<job>`` committed, heartbeats; and the refusals."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import (
    committed,
    create_topic,
    grow_topic,
    produce_sequenced,
    read_latest_outputs,
)

from airflow_samza_expand.core._liveness import (
    CAPABILITY_COUNTS_STALE,
    CAPABILITY_IN_APP,
    CAPABILITY_IN_PLACE,
    CAPABILITY_STANDBY,
)
from airflow_samza_expand.core._plan import plan_expansion
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store import open_store

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

USER_JOB = Path(__file__).resolve().parents[2] / "airflow_samza_expand" / "examples" / "user_job.py"


def _user_job() -> Any:
    spec = importlib.util.spec_from_file_location("user_job", USER_JOB)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _spark_kafka(spark) -> None:
    if "spark-sql-kafka" not in (spark.conf.get("spark.jars", "") or ""):
        pytest.skip("Spark's Kafka connector is not fetched (scripts/setup.sh, needs Maven)")


class UserJob:
    def __init__(self, spark, bootstrap: str, unique_topic, tmp_path: Path, source: str):
        self.bootstrap, self.source = bootstrap, source
        self.topic, self.output = unique_topic("uin"), unique_topic("uout")
        self.name = "user-" + self.topic
        create_topic(bootstrap, self.topic, 2)
        create_topic(bootstrap, self.output, 1)
        self.coordinator = str(tmp_path / "coordinator")
        self.checkpoint = str(tmp_path / "checkpoint")
        self.store = open_store(self.coordinator, self.name, {"bootstrap.servers": bootstrap})

    def run(self, *extra: str) -> int:
        argv = [
            "--job-name", self.name, "--bootstrap-servers", self.bootstrap,
            "--coordinator", self.coordinator, "--checkpoint-dir", self.checkpoint,
            "--output-topic", self.output, "--trigger", "available-now",
            "--processor-id", "user-1", "--max-records-per-batch", "700",
            "--source", self.source, "--shuffle-partitions", "2", *extra,
        ]  # fmt: skip
        return _user_job().main(argv)


@pytest.mark.parametrize("source", ["kafka", "python"])
def test_user_job_keeps_counts_across_growth_and_reads_new_partitions_from_start(
    spark, kafka_bootstrap, unique_topic, tmp_path, source
) -> None:
    if source == "kafka":
        _spark_kafka(spark)
    job = UserJob(spark, kafka_bootstrap, unique_topic, tmp_path, source)
    v1 = job.store.write_job_model(JobModel.initial(job.name, {job.topic: 2}))
    keys = [f"key-{i}" for i in range(40)]
    seqs = produce_sequenced(kafka_bootstrap, job.topic, keys, 15)
    assert job.run() == 0
    assert sum(committed(kafka_bootstrap, job.name, job.topic, 2).values()) == 600
    # the expansion: 2 -> 4 partitions, job model v2 (fixed tasks), the same checkpoint
    grow_topic(kafka_bootstrap, job.topic, 4)
    produce_sequenced(kafka_bootstrap, job.topic, keys, 15, first_seq=seqs)
    job.store.write_job_model(plan_expansion(v1, {job.topic: 2}, {job.topic: 4}).new_job_model)
    assert job.run() == 0
    outputs = read_latest_outputs(kafka_bootstrap, job.output)
    assert set(outputs) == set(keys)
    for key, out in outputs.items():
        assert (out["count"], out["last_seq"], out["violations"]) == (30, 29, 0), (key, out)
        assert out["task"] in {"Partition 0", "Partition 1"}
    ends = committed(kafka_bootstrap, job.name, job.topic, 4)
    assert sum(ends.values()) == 1200 and all(ends[p] > 0 for p in (2, 3)), ends
    proc = job.store.processors()["user-1"]
    assert (proc["job_model_version"], proc["state"]) == (2, "stopped")
    # only the provider's reader can switch in place (Spark's cannot change assign)
    # and count stale placements before a snapshot in its own batches; on Spark's source the
    # job hands job.run the function starting its query, so it can restart it in-app (1.10)
    in_place = [CAPABILITY_IN_PLACE, CAPABILITY_COUNTS_STALE] if source == "python" else []
    in_app = [CAPABILITY_IN_APP] if source == "kafka" else []
    assert proc.get("capabilities") == sorted([CAPABILITY_STANDBY, *in_place, *in_app])


@pytest.mark.parametrize("source", ["kafka", "python"])
def test_an_existing_job_moved_onto_the_runtime_starts_where_its_group_stopped(
    spark, kafka_bootstrap, unique_topic, tmp_path, source
) -> None:
    """A job moved onto the runtime does not read again what it processed before: its first
    run (a fresh checkpoint) starts each partition at its consumer group's committed offset -
    the position `init-job --from-group` copied in (Spark's source), or the group the job used,
    kept with ``--consumer-group`` (the provider's reader)."""
    from airflow_samza_expand._kafka.admin import KafkaAdmin
    from airflow_samza_expand._kafka.config import client_config
    from airflow_samza_expand._protocol.cli.init_job import init_job

    if source == "kafka":
        _spark_kafka(spark)
    job = UserJob(spark, kafka_bootstrap, unique_topic, tmp_path, source)
    keys = [f"key-{i}" for i in range(20)]
    seqs = produce_sequenced(kafka_bootstrap, job.topic, keys, 5)  # what the old job processed
    legacy = "legacy-" + job.topic
    config = client_config(kafka_bootstrap)
    with KafkaAdmin(config, timeout_s=15) as admin:  # the old job's position: all of it
        ends = admin.high_watermarks({job.topic: [0, 1]})[job.topic]
        admin.commit_group_offsets(legacy, {job.topic: ends})
    produce_sequenced(kafka_bootstrap, job.topic, keys, 4, first_seq=seqs)  # arrived since
    if source == "kafka":
        init_job(config, job.name, [job.topic], coordinator=job.coordinator, from_group=legacy)
        group, extra = job.name, ()
    else:
        job.store.write_job_model(JobModel.initial(job.name, {job.topic: 2}))
        group, extra = legacy, ("--consumer-group", legacy)
    assert job.run(*extra) == 0
    outputs = read_latest_outputs(kafka_bootstrap, job.output)
    assert set(outputs) == set(keys)
    for key, out in outputs.items():  # only the 4 new records of each key, seq 5..8
        assert (out["count"], out["last_seq"]) == (4, 8), (key, out)
    assert sum(committed(kafka_bootstrap, group, job.topic, 2).values()) == 20 * 9
    assert job.store.processors()["user-1"].get("consumer_group") == group


def test_attach_refuses_a_job_without_a_job_model(spark, kafka_bootstrap, unique_topic, tmp_path):
    job = UserJob(spark, kafka_bootstrap, unique_topic, tmp_path, "kafka")
    with pytest.raises(SystemExit) as exited:
        job.run()
    assert exited.value.code == 2
