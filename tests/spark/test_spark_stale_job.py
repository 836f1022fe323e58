"""The real job (Spark local[2]) restarted after a 2 -> 4 growth with ``--barrier-offsets``: a
record placed by hand into an old partition after the snapshot is reported (warn), and with
``--on-stale-placement fail`` the job stops naming the key."""

from __future__ import annotations

import json

import pytest
from spark_helpers import grow_topic, produce_raw, produce_sequenced
from test_spark_job import Job

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.partitioners import crc32_partition
from airflow_samza_expand._protocol.barrier.reads import barrier_to_dict, snapshot_barrier
from airflow_samza_expand.core._plan import plan_expansion
from airflow_samza_expand.core.model import JobModel

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]


def _moved(prefix: str) -> str:
    return next(
        k
        for k in (f"{prefix}-{i}" for i in range(1000))
        if crc32_partition(k.encode(), 2) != crc32_partition(k.encode(), 4)
    )


def _stale_lines(path) -> list[dict]:
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [line for line in lines if "stale_placements" in line]


def test_stale_placement_after_the_barrier_warn_then_fail(
    spark, kafka_bootstrap, unique_topic, tmp_path, capsys
) -> None:
    job = Job(spark, kafka_bootstrap, unique_topic, tmp_path)
    v1 = job.store.write_job_model(JobModel.initial(job.name, {job.topic: 2}))
    keys = [f"key-{i}" for i in range(20)]
    seqs = produce_sequenced(kafka_bootstrap, job.topic, keys, 5)
    assert job.run() == 0
    grow_topic(kafka_bootstrap, job.topic, 4)
    with KafkaAdmin({"bootstrap.servers": kafka_bootstrap}, timeout_s=15) as admin:
        barrier = barrier_to_dict(snapshot_barrier(admin, {job.topic: 2}))
    job.store.write_job_model(plan_expansion(v1, {job.topic: 2}, {job.topic: 4}).new_job_model)
    produce_sequenced(kafka_bootstrap, job.topic, keys, 5, first_seq=seqs)  # fresh producer
    first = _moved("late")
    produce_raw(kafka_bootstrap, job.topic, [(crc32_partition(first.encode(), 2), first, {})])
    progress = tmp_path / "progress.jsonl"
    order = ["--barrier-offsets", json.dumps(barrier), "--partitioner", "crc32"]

    assert job.run(*order, "--progress-file", str(progress)) == 0
    (line,) = _stale_lines(progress)
    assert line["stale_placements"]["keys"] == [[first, 1]]
    assert line["order"].startswith("order: at risk - 1 records of 1 keys")
    # counted in the job's own micro-batches (the provider's reader), not re-read by the driver
    assert line["counted_by"]["the job's micro-batches"] > 0, line
    assert line["counted_by"]["a separate scan"] == 0, line
    assert job.outputs()[first]["count"] == 1  # warn: processed, counted, reported

    second = _moved("later")
    produce_raw(kafka_bootstrap, job.topic, [(crc32_partition(second.encode(), 2), second, {})])
    capsys.readouterr()
    assert job.run(*order, "--on-stale-placement", "fail") == 2
    err = capsys.readouterr().err
    assert "error: order: at risk" in err and repr(second) in err
    assert "--on-stale-placement fail" in err
    assert job.store.processors()["proc-1"]["state"] == "failed"
