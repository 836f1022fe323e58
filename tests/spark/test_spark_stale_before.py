"""Stale placements before the snapshot at production rates (docs/design.md 'Stale placements'):
the running job (the shipped job on the provider's reader, Spark local[2]) counts the stale
placements of an expansion in progress in its own micro-batches and publishes them through the
coordinator store; the barrier's look (`order_poll`) takes that count (``counted_by`` the job)
and reads nothing itself. A job that does not advertise ``counts-stale`` still gets the barrier's
scan, from where the job's count ended (nothing counted twice)."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable
from spark_helpers import create_topic, grow_topic, mark_grown, planned_growth, produce_raw
from test_spark_job import Job

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.partitioners import crc32_partition
from airflow_samza_expand._protocol.barrier.before_snapshot import order_poll
from airflow_samza_expand._protocol.barrier.evidence import evidence_of, record_scan_start
from airflow_samza_expand._protocol.barrier.reads import snapshot_barrier
from airflow_samza_expand._protocol.barrier.stale_scan import StaleScanner
from airflow_samza_expand.core._clock import now_iso
from airflow_samza_expand.core._liveness import CAPABILITY_COUNTS_STALE, statuses
from airflow_samza_expand.core._order import JOB_SOURCE, SCAN_SOURCE
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.spark._source import SOURCE_SCHEMA, SamzaKafkaStreamReader
from airflow_samza_expand.spark._stale_batch import RuleFile
from airflow_samza_expand.spark._stale_before import BeforeSnapshotCount
from airflow_samza_expand.store._files import FileCoordinatorStore

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

WAIT_S = 180.0


class SpyScanner(StaleScanner):
    """The barrier's scanner, counting what it reads."""

    read = 0

    def poll(self, positions, *, until=None):  # type: ignore[no-untyped-def]
        result = super().poll(positions, until=until)
        self.read += result.records_read
        return result


def _wait_for(what: str, check, thread: threading.Thread) -> object:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        assert thread.is_alive(), f"the job ended while waiting for {what}"
        value = check()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def _moved_keys(prefix: str, n: int) -> list[str]:
    keys = (f"{prefix}-{i}" for i in range(10_000))
    moved = (k for k in keys if crc32_partition(k.encode(), 2) != crc32_partition(k.encode(), 4))
    return [next(moved) for _ in range(n)]


@pytest.mark.slow
def test_the_barrier_takes_the_running_jobs_count_and_scans_without_it(
    spark, kafka_bootstrap, unique_topic, tmp_path
) -> None:
    job = Job(spark, kafka_bootstrap, unique_topic, tmp_path)
    job.store.write_job_model(JobModel.initial(job.name, {job.topic: 2}))
    config = {"bootstrap.servers": kafka_bootstrap}
    typed = FileCoordinatorStore(job.coordinator, job.name)  # the barrier's (Airflow's) view
    expansion_id = f"{job.name}~in.2-4"
    typed.put_expansion(planned_growth(job.name, job.topic, expansion_id), expected_revision=0)
    produce_raw(kafka_bootstrap, job.topic, [(p, f"old-{p}", {}) for p in (0, 1)] * 3)
    result: dict[str, int] = {}
    thread = threading.Thread(
        target=lambda: result.setdefault("rc", job.run(trigger="processing-time=300ms")),
        daemon=True,
    )
    thread.start()
    admin = KafkaAdmin(config, timeout_s=15)
    try:
        _wait_for(
            "the job to advertise counts-stale",
            lambda: any(
                s.can(CAPABILITY_COUNTS_STALE) and s.state == "running"
                for s in statuses(typed.processors()).values()
            ),
            thread,
        )
        record_scan_start(admin, typed, expansion_id)
        admin.create_partitions(job.topic, 4)
        mark_grown(typed, expansion_id)
        expanded_at = time.time()
        _wait_for("the job's first count", lambda: typed.stale_count(expansion_id), thread)
        # producers still on the old count: moved keys into their old partitions (stale),
        # fresh keys where the new count puts them
        stale = [(crc32_partition(k.encode(), 2), k, {}) for k in _moved_keys("stale", 30)]
        fresh = [(crc32_partition(k.encode(), 4), k, {}) for k in _moved_keys("fresh", 30)]
        produce_raw(kafka_bootstrap, job.topic, stale + fresh)
        ends = snapshot_barrier(admin, {job.topic: 2})

        def counted() -> object:
            count = typed.stale_count(expansion_id)
            reached = count and all(
                count.checked[job.topic][p] >= ends[job.topic][p] for p in (0, 1)
            )
            return count if reached else None

        count = _wait_for("the job to count what was produced", counted, thread)
        assert count.processor_id == "proc-1" and count.summary.records == len(stale)
        assert count.rescanned == 0 and count.records >= len(stale)  # in its batches

        spy = SpyScanner(config, {job.topic: (2, 4)}, "crc32", admin=admin)
        poll = order_poll(
            admin, typed, config, expansion_id=expansion_id, expanded_at=expanded_at,
            grace_ends=expanded_at, deadline=None, stale_quiet_s=0.0, scanner=spy,
        )  # fmt: skip
        assert spy.read == 0 and poll.records_read == 0  # the barrier read nothing itself
        assert poll.counted_by.startswith(JOB_SOURCE) and "proc-1" in poll.counted_by
        assert poll.decision.action == "snapshot", poll.decision.reason
        stored = evidence_of(typed.get_expansion(expansion_id))
        assert stored.before_snapshot.records == len(stale)
        assert stored.counted_by == poll.counted_by
        assert {k for k in stored.before_snapshot.keys} == {k for _p, k, _v in stale}

        # a job that does not advertise the capability (Spark's own Kafka source): the scan
        job.store.request_stop(1, "test")
        thread.join(WAIT_S)
        assert result == {"rc": 0}
        typed.heartbeat("proc-1", 1, "running", role="active", capabilities=["standby"])
        late = [(crc32_partition(k.encode(), 2), k, {}) for k in _moved_keys("late", 4)]
        produce_raw(kafka_bootstrap, job.topic, late)
        poll = order_poll(
            admin, typed, config, expansion_id=expansion_id, expanded_at=expanded_at,
            grace_ends=expanded_at, deadline=None, stale_quiet_s=0.0, scanner=spy,
        )  # fmt: skip
        assert spy.read == len(late) == poll.records_read  # from the job's count on, only
        assert len(poll.found) == len(late)
        assert poll.counted_by == f"{stored.counted_by} and {SCAN_SOURCE}"
        after = evidence_of(typed.get_expansion(expansion_id)).before_snapshot
        assert after.records == len(stale) + len(late)
    finally:
        if thread.is_alive():
            job.store.request_stop(1, "test cleanup")
            thread.join(WAIT_S)
        admin.close()
        typed.close()


def _read(reader: SamzaKafkaStreamReader, start: dict, end: dict) -> list:
    parts = reader.partitions(start, end)
    for part in parts:
        for _ in reader.read(part):
            pass
    return parts


def test_the_reader_counts_before_the_snapshot_and_the_driver_publishes_each_range_once(
    kafka_bootstrap, unique_topic, tmp_path
) -> None:
    """Driven directly (no Spark session): a batch planned before the driver knew of the
    expansion is re-read by the driver; later batches are counted by the reader per range; a
    replayed batch counts nothing twice; the snapshot ends the count."""
    topic = unique_topic("before")
    create_topic(kafka_bootstrap, topic, 2)
    produce_raw(kafka_bootstrap, topic, [(p, f"old-{p}", {}) for p in (0, 1)] * 3)
    config = {"bootstrap.servers": kafka_bootstrap}
    store = FileCoordinatorStore(str(tmp_path / "coord"), "job-" + topic)
    v1 = store.write_job_model(JobModel.initial("job-" + topic, {topic: 2}))
    store.put_expansion(planned_growth(v1.job_name, topic, "exp"), expected_revision=0)
    with KafkaAdmin(config, timeout_s=15) as admin:
        record_scan_start(admin, store, "exp")
    grow_topic(kafka_bootstrap, topic, 4)
    mark_grown(store, "exp")
    first = [(crc32_partition(k.encode(), 2), k, {}) for k in _moved_keys("a", 10)]
    produce_raw(kafka_bootstrap, topic, first)
    rule_path = str(tmp_path / "stale-before")
    options = {"job_model": v1.to_json(), "bootstrap_servers": kafka_bootstrap}
    reader = SamzaKafkaStreamReader(SOURCE_SCHEMA, {**options, "stale_before_path": rule_path})
    count = BeforeSnapshotCount(
        store, threading.Lock(), "proc-1", config, str(tmp_path / "reports"), rule_path
    )
    try:
        start = {topic: {"0": 0, "1": 0}}
        end1 = reader.latestOffset(start, ReadAllAvailable())
        assert all(p.before is None for p in _read(reader, start, end1))  # no rule yet
        count.poll(v1, end1)  # the expansion: [scan start, end1) has no report, re-read
        published = store.stale_count("exp")
        assert (published.summary.records, published.rescanned) == (10, 10)

        second = [(crc32_partition(k.encode(), 2), k, {}) for k in _moved_keys("b", 5)]
        fresh = [(crc32_partition(k.encode(), 4), k, {}) for k in _moved_keys("c", 5)]
        produce_raw(kafka_bootstrap, topic, second + fresh)
        end2 = reader.latestOffset(end1, ReadAllAvailable())
        parts = _read(reader, end1, end2)
        assert parts and all(p.before == count.rule for p in parts)
        _read(reader, end1, end2)  # a replayed batch writes the same reports
        count.after_commit(end2)
        count.after_commit(end2)
        published = store.stale_count("exp")
        assert (published.summary.records, published.rescanned) == (15, 10)
        assert published.records == 15  # fresh moved keys went to the new partitions
        assert published.checked == {topic: {int(p): o for p, o in end2[topic].items()}}

        record = store.get_expansion("exp")
        store.put_expansion(
            dataclasses.replace(record, barrier={topic: {0: 99, 1: 99}}),
            expected_revision=record.revision,
        )
        count.poll(v1, end2)
        assert count.rule is None and RuleFile(rule_path).poll() is None
    finally:
        reader.stop()
        count.close()
        store.close()


def test_the_job_counts_only_a_grown_expansion_of_its_model_without_a_snapshot() -> None:
    from airflow_samza_expand.core._order import OrderEvidence
    from airflow_samza_expand.spark._stale_before import in_progress

    planned = planned_growth("job", "orders", "exp")
    started = OrderEvidence(scan_start={"orders": {0: 5, 1: 7}}).to_dict()
    planned = dataclasses.replace(planned, stale_placements=started)
    grown = planned.with_step("expand", started_at=now_iso(), ended_at=now_iso())
    assert in_progress([planned], 1) is None  # CreatePartitions may not have happened
    assert in_progress([grown], 1) == grown
    assert in_progress([grown], 2) is None  # another job model
    assert in_progress([dataclasses.replace(grown, barrier={"orders": {0: 9, 1: 9}})], 1) is None
