"""Stale placements before the snapshot, from the job's own count (docs/design.md 'Stale placements'
says who counts), at the protocol level (real broker, typed file store): the barrier takes the
count its live active processor publishes when it advertises ``counts-stale`` and reads nothing
itself; it waits while that count is behind; it scans when no such processor publishes one (from
where the count ended: nothing twice)."""

from __future__ import annotations

from kafka_test_data import produce
from test_protocol_order import GRACE, QUIET, T0, _moved, _planned

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand._kafka.partitioners import crc32_partition
from airflow_samza_expand._protocol.barrier.before_snapshot import order_poll
from airflow_samza_expand._protocol.barrier.evidence import evidence_of, record_scan_start
from airflow_samza_expand._protocol.barrier.reads import snapshot_barrier
from airflow_samza_expand._protocol.barrier.stale_scan import StaleScanner
from airflow_samza_expand.core._clock import now_iso
from airflow_samza_expand.core._order import JOB_SOURCE, SCAN_SOURCE, JobStaleCount
from airflow_samza_expand.core._stale import StalePlacement, StaleSummary
from airflow_samza_expand.store._files import FileCoordinatorStore


class SpyScanner(StaleScanner):
    polls = 0

    def poll(self, positions, *, until=None):  # type: ignore[no-untyped-def]
        self.polls += 1
        return super().poll(positions, until=until)


def test_the_barrier_takes_the_jobs_count_waits_for_it_and_scans_without_it(
    kafka_bootstrap, unique_topic, tmp_path
) -> None:
    config = client_config(kafka_bootstrap)
    topic, job = unique_topic("orders"), unique_topic("job")
    admin = KafkaAdmin(config, timeout_s=15)
    admin.ensure_topic(topic, 2)
    store = FileCoordinatorStore(str(tmp_path / "store"), job)
    eid = _planned(store, job, topic, {topic: 2}, {topic: 4})
    scanner = SpyScanner(config, {topic: (2, 4)}, "crc32", admin=admin)

    def look(now: float):
        return order_poll(
            admin, store, config, expansion_id=eid, expanded_at=T0, grace_ends=T0 + GRACE,
            deadline=None, stale_quiet_s=QUIET, scanner=scanner, now=T0 + now,
        )  # fmt: skip

    try:
        start = record_scan_start(admin, store, eid).scan_start
        admin.create_partitions(topic, 4)
        stale = [(k, b"{}", crc32_partition(k, 2)) for k in _moved(6, "held")]
        produce(config, topic, stale)
        ends = snapshot_barrier(admin, {topic: 2})
        placements = [
            StalePlacement(topic, p, start[topic][p] + i, k.decode(), crc32_partition(k, 4))
            for i, (k, _v, p) in enumerate(stale)
        ]
        store.heartbeat("proc-1", 1, "running", role="active", capabilities=["counts-stale"])

        def publish(checked) -> None:  # what the job's driver publishes (spark._stale_before)
            summary = StaleSummary().add(placements)
            store.put_stale_count(JobStaleCount(eid, "proc-1", 1, checked, summary, now_iso()))

        publish(start)  # the job has checked nothing yet: the barrier waits, reads nothing
        behind = look(GRACE + QUIET + 1)
        assert behind.decision.action == "wait" and "checking 6 record(s)" in behind.decision.reason
        assert (scanner.polls, behind.records_read) == (0, 0)

        publish(ends)  # caught up: its count is the barrier's, with counted_by the job
        taken = look(GRACE + QUIET + 2)
        assert taken.decision.action == "snapshot", taken.decision.reason
        assert (scanner.polls, taken.records_read) == (0, 0)
        assert taken.counted_by.startswith(JOB_SOURCE) and "proc-1" in taken.counted_by
        stored = evidence_of(store.get_expansion(eid))
        assert stored.before_snapshot.records == 6 and stored.scan_positions == ends

        # the processor no longer advertises it (a restart on Spark's own source): the scan,
        # from where the job's count ended
        store.heartbeat("proc-1", 1, "running", role="active", capabilities=["standby"])
        late = [(k, b"{}", crc32_partition(k, 2)) for k in _moved(2, "late")]
        produce(config, topic, late)
        scanned = look(GRACE + QUIET + 3)
        assert scanner.polls == 1 and scanned.records_read == 2 and len(scanned.found) == 2
        assert scanned.counted_by == f"{taken.counted_by} and {SCAN_SOURCE}"
        assert evidence_of(store.get_expansion(eid)).before_snapshot.records == 8
    finally:
        scanner.close()
        admin.close()
        store.close()
