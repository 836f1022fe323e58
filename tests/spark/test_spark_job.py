"""The stateful job end to end: development broker (or real cluster), Spark local[2]."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

import pytest
from spark_helpers import (
    committed,
    create_topic,
    grow_topic,
    produce_raw,
    produce_sequenced,
    read_latest_outputs,
)

from airflow_samza_expand.core._plan import plan_expansion
from airflow_samza_expand.core.groupers import GroupByPartition
from airflow_samza_expand.core.model import (
    JobModel,
    StreamPartitionCounts,
    SystemStreamPartition,
    mapping_from_groups,
)
from airflow_samza_expand.spark._state import TASK_SET_FILE
from airflow_samza_expand.spark.job import main
from airflow_samza_expand.store import open_store

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


class Job:
    """One job's topics, coordinator store and checkpoint for a test."""

    def __init__(
        self,
        spark: Any,
        bootstrap: str,
        unique_topic: Any,
        tmp_path: Any,
        partitions: int = 2,
        state_buckets: int = 0,
        coordinator: str = "file",
        state_shards: int = 0,
    ) -> None:
        self.spark = spark
        self.bootstrap = bootstrap
        self.topic = unique_topic("in")
        self.output = unique_topic("out")
        self.name = "job-" + self.topic
        create_topic(bootstrap, self.topic, partitions)
        create_topic(bootstrap, self.output, 1)
        self.coordinator = "kafka" if coordinator == "kafka" else str(tmp_path / "coordinator")
        self.checkpoint = str(tmp_path / "checkpoint")
        self.store = open_store(self.coordinator, self.name, {"bootstrap.servers": bootstrap})
        self.state_buckets = state_buckets
        self.state_shards = state_shards

    def argv(self, *extra: str, trigger: str = "available-now") -> list[str]:
        return [
            "--job-name",
            self.name,
            "--bootstrap-servers",
            self.bootstrap,
            "--coordinator",
            self.coordinator,
            "--checkpoint-dir",
            self.checkpoint,
            "--output-topic",
            self.output,
            "--trigger",
            trigger,
            "--processor-id",
            "proc-1",
            "--state-buckets",
            str(self.state_buckets),
            "--state-shards",
            str(self.state_shards),
            *extra,
        ]

    def run(self, *extra: str, trigger: str = "available-now") -> int:
        return main(self.argv(*extra, trigger=trigger), spark=self.spark)

    def outputs(self) -> dict[str, dict]:
        return read_latest_outputs(self.bootstrap, self.output)


def keys_by_partition(bootstrap: str, topic: str) -> dict[str, set[int]]:
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kbp",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    parts = sorted(c.list_topics(topic, timeout=30).topics[topic].partitions)
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    pending, found = set(parts), {}
    while pending:
        m = c.poll(10)
        assert m is not None
        if m.error():
            assert m.error().code() == KafkaError._PARTITION_EOF
            pending.discard(m.partition())
            continue
        found.setdefault(m.key().decode(), set()).add(m.partition())
    c.close()
    return found


@pytest.mark.parametrize("state_buckets", [0, 8], ids=["state-per-key", "state-8-buckets"])
def test_exact_counts_10000_records_over_2_partitions(
    spark, kafka_bootstrap, unique_topic, tmp_path, state_buckets
) -> None:
    job = Job(spark, kafka_bootstrap, unique_topic, tmp_path, state_buckets=state_buckets)
    keys = [f"key-{i}" for i in range(100)]
    produce_sequenced(kafka_bootstrap, job.topic, keys, 100)  # 10,000 records
    v1 = job.store.write_job_model(JobModel.initial(job.name, {job.topic: 2}))
    assert job.run("--max-records-per-batch", "3000") == 0
    outputs = job.outputs()
    assert set(outputs) == set(keys)
    placement = keys_by_partition(kafka_bootstrap, job.topic)
    for key in keys:
        (partition,) = placement[key]
        assert outputs[key] == {
            "key": key,
            "count": 100,
            "last_seq": 99,
            "violations": 0,
            "task": f"Partition {partition}",
        }
    assert sum(o["count"] for o in outputs.values()) == 10_000
    # The group <job> holds the next offset to read of every partition: all read.
    assert sum(committed(kafka_bootstrap, job.name, job.topic, 2).values()) == 10_000
    proc = job.store.processors()["proc-1"]
    assert (proc["job_model_version"], proc["state"]) == (v1.version, "stopped")


def test_restart_resumes_from_checkpoint_without_double_counting(
    spark, kafka_bootstrap, unique_topic, tmp_path
) -> None:
    job = Job(spark, kafka_bootstrap, unique_topic, tmp_path)
    keys = [f"key-{i}" for i in range(50)]
    seqs = produce_sequenced(kafka_bootstrap, job.topic, keys, 20)
    job.store.write_job_model(JobModel.initial(job.name, {job.topic: 2}))
    assert job.run() == 0
    assert {o["count"] for o in job.outputs().values()} == {20}
    produce_sequenced(kafka_bootstrap, job.topic, keys, 30, first_seq=seqs)
    assert job.run("--max-records-per-batch", "500") == 0
    outputs = job.outputs()
    assert {(o["count"], o["last_seq"], o["violations"]) for o in outputs.values()} == {(50, 49, 0)}
    assert sum(committed(kafka_bootstrap, job.name, job.topic, 2).values()) == 50 * 50
    # A third run with nothing new changes nothing.
    assert job.run() == 0
    assert job.outputs() == outputs


def test_order_violations_are_detected(spark, kafka_bootstrap, unique_topic, tmp_path) -> None:
    job = Job(spark, kafka_bootstrap, unique_topic, tmp_path)
    # One task owns both partitions, so a key whose records sit in both partitions is applied
    # in (partition, offset) order: without the in-group sort these would look reordered.
    v1 = JobModel.initial(job.name, {job.topic: 2}, grouper="AllSspToSingleTaskGrouper")
    job.store.write_job_model(v1)
    records = []
    records += [(0, "in-order", {"seq": s}) for s in range(40)]
    records += [(1, "in-order", {"seq": s}) for s in range(40, 80)]
    records += [(0, "reordered", {"seq": s}) for s in (0, 1, 3, 2, 4)]
    records += [(1, "lost", {"seq": s}) for s in (0, 1, 3)]
    records += [(1, "repeated", {"seq": s}) for s in (0, 1, 1, 2)]
    produce_raw(kafka_bootstrap, job.topic, records)
    assert job.run() == 0
    out = job.outputs()
    got = {k: (v["count"], v["last_seq"], v["violations"]) for k, v in out.items()}
    assert got == {
        "in-order": (80, 79, 0),
        "reordered": (5, 4, 3),
        "lost": (3, 3, 1),
        "repeated": (4, 2, 1),
    }


def _grow(job: Job, v2: JobModel, *extra: str) -> tuple[dict[str, dict], set[str], int]:
    """Phase 1 on 2 partitions, grow to 4, phase 2, restart under ``v2``."""
    keys = [f"key-{i}" for i in range(40)]
    seqs = produce_sequenced(job.bootstrap, job.topic, keys, 15)
    assert job.run() == 0
    grow_topic(job.bootstrap, job.topic, 4)
    produce_sequenced(job.bootstrap, job.topic, keys, 15, first_seq=seqs)
    job.store.write_job_model(v2)
    rc = job.run(*extra)
    moved = {
        k
        for k, parts in keys_by_partition(job.bootstrap, job.topic).items()
        if any(p >= 2 for p in parts)
    }
    assert moved and moved != set(keys)  # some keys moved to the new partitions, some did not
    return job.outputs(), moved, rc


@pytest.mark.parametrize("state_shards", [0, 3], ids=["state-per-key", "state-3-shards"])
def test_growth_with_fixed_tasks_continues_every_keys_count(
    spark, kafka_bootstrap, unique_topic, tmp_path, state_shards
) -> None:
    # three shards for two tasks: a shard holds keys of both tasks (their states kept apart)
    job = Job(spark, kafka_bootstrap, unique_topic, tmp_path, state_shards=state_shards)
    v1 = job.store.write_job_model(JobModel.initial(job.name, {job.topic: 2}))
    v2 = plan_expansion(v1, {job.topic: 2}, {job.topic: 4}).new_job_model
    outputs, moved, rc = _grow(job, v2)
    assert rc == 0
    assert len(outputs) == 40
    for key, out in outputs.items():
        assert (out["count"], out["last_seq"], out["violations"]) == (30, 29, 0), key
        assert out["task"] in {"Partition 0", "Partition 1"}
    assert sum(committed(kafka_bootstrap, job.name, job.topic, 4).values()) == 40 * 30
    proc = job.store.processors()["proc-1"]
    assert (proc["job_model_version"], proc["state"]) == (2, "stopped")


def _plain_group_by_partition(v1: JobModel, topic: str) -> JobModel:
    ssps = [SystemStreamPartition("kafka", topic, p) for p in range(4)]
    return JobModel(
        version=v1.version + 1,
        job_name=v1.job_name,
        streams=(StreamPartitionCounts("kafka", topic, 4, 2),),
        ssp_to_task=mapping_from_groups(GroupByPartition().group(ssps)),
        grouper="GroupByPartition",
    )


def test_negative_control_plain_group_by_partition_restarts_moved_keys_from_zero(
    spark, kafka_bootstrap, unique_topic, tmp_path
) -> None:
    job = Job(spark, kafka_bootstrap, unique_topic, tmp_path)
    v1 = job.store.write_job_model(
        JobModel.initial(job.name, {job.topic: 2}, grouper="GroupByPartition")
    )
    v2 = _plain_group_by_partition(v1, job.topic)
    # First the guard: the new task set is refused and nothing changes.
    keys = [f"key-{i}" for i in range(40)]
    seqs = produce_sequenced(kafka_bootstrap, job.topic, keys, 15)
    assert job.run() == 0
    grow_topic(kafka_bootstrap, job.topic, 4)
    produce_sequenced(kafka_bootstrap, job.topic, keys, 15, first_seq=seqs)
    job.store.write_job_model(v2)
    task_file = tmp_path / "checkpoint" / TASK_SET_FILE
    before = (task_file.read_text(), committed(kafka_bootstrap, job.name, job.topic, 4))
    assert job.run() == 2
    assert (task_file.read_text(), committed(kafka_bootstrap, job.name, job.topic, 4)) == before
    # Forced through: moved keys restart from 0 in their new tasks - the wrong result appears.
    assert job.run("--allow-task-change") == 0
    outputs = job.outputs()
    moved = {
        k
        for k, parts in keys_by_partition(kafka_bootstrap, job.topic).items()
        if any(p >= 2 for p in parts)
    }
    assert moved and moved != set(keys)
    for key, out in outputs.items():
        if key in moved:
            assert out["task"] in {"Partition 2", "Partition 3"}
            assert out["count"] == 15, key  # lost the 15 records counted before the growth
            assert out["violations"] == 1  # its first seq in the new task is 15, not 0
        else:
            assert (out["count"], out["violations"]) == (30, 0), key


@pytest.mark.parametrize("coordinator", ["file", "kafka"])
def test_stop_on_control_record_and_heartbeat_versions(
    spark, kafka_bootstrap, unique_topic, tmp_path, coordinator
) -> None:
    job = Job(spark, kafka_bootstrap, unique_topic, tmp_path, coordinator=coordinator)
    v1 = job.store.write_job_model(JobModel.initial(job.name, {job.topic: 2}))
    job.store.request_stop(v1.version, "test: stale request for v1")
    v2 = job.store.write_job_model(dataclasses.replace(v1, version=2))
    keys = [f"key-{i}" for i in range(20)]
    seqs = produce_sequenced(kafka_bootstrap, job.topic, keys, 10)
    result: dict[str, int] = {}
    thread = threading.Thread(
        target=lambda: result.setdefault(
            "rc", job.run("--max-records-per-batch", "100", trigger="processing-time=500ms")
        ),
        daemon=True,
    )
    thread.start()
    # The stale stop for v1 is ignored: the job runs v2 and keeps reading new data.
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        proc = job.store.processors().get("proc-1")
        if (
            proc
            and proc["state"] == "running"
            and sum(committed(kafka_bootstrap, job.name, job.topic, 2).values()) >= 200
        ):
            break
        assert thread.is_alive(), f"job ended early with {result}"
        time.sleep(0.5)
    else:
        pytest.fail(f"job never committed the first 200 records; heartbeat {proc}")
    assert proc["job_model_version"] == v2.version
    seqs = produce_sequenced(kafka_bootstrap, job.topic, keys, 10, first_seq=seqs)
    job.store.request_stop(v2.version, "test: expansion")
    thread.join(240)
    assert not thread.is_alive(), "job did not stop on the control record"
    assert result["rc"] == 0
    proc = job.store.processors()["proc-1"]
    assert (proc["job_model_version"], proc["state"]) == (2, "stopped")
    # What it committed is exactly what it counted: nothing processed is left uncommitted.
    outputs = job.outputs()
    done = sum(committed(kafka_bootstrap, job.name, job.topic, 2).values())
    assert done == sum(o["count"] for o in outputs.values())
    assert all(o["violations"] == 0 for o in outputs.values())
    # Once the request is cleared, a restart on the same checkpoint finishes the rest.
    job.store.clear_stop()
    assert job.run() == 0
    assert {o["count"] for o in job.outputs().values()} == {20}
