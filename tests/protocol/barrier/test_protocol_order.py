"""The proof of order (docs/design.md 'Stale placements') at the protocol level, on a real
broker and a typed coordinator store: the barrier waits while stale placements arrive and counts
them in the record; the submit arguments; the restarted job's counts land in the record; the
report's order line."""

from __future__ import annotations

import dataclasses
import json
import logging
import time

import pytest
from kafka_test_data import produce

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand._kafka.partitioners import crc32_partition
from airflow_samza_expand._protocol.barrier.evidence import (
    job_order_args,
    job_publisher,
    order_summary,
    record_scan_start,
)
from airflow_samza_expand._protocol.barrier.reads import snapshot_barrier
from airflow_samza_expand._protocol.barrier.step import order_poll
from airflow_samza_expand.core._clock import now_iso
from airflow_samza_expand.core._order import OrderEvidence
from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus
from airflow_samza_expand.core._stale import StalePlacement, StaleSummary
from airflow_samza_expand.store._files import FileCoordinatorStore

EVIDENCE_LOG = "airflow_samza_expand._protocol.barrier.evidence"

T0 = 1_900_000_000.0  # the expansion, in the poll's clock
GRACE, QUIET = 60.0, 30.0


@pytest.fixture
def config(kafka_bootstrap):
    return client_config(kafka_bootstrap)


@pytest.fixture
def admin(config):
    admin = KafkaAdmin(config, timeout_s=15)
    yield admin
    admin.close()


def _planned(store, job: str, grown: str, before: dict, after: dict) -> str:
    """Store the planned expansion record of ``grown`` (CRC32 detected); its id."""
    stamp = now_iso()
    record = ExpansionRecord(
        expansion_id=f"{job}~orders.2-4",
        job_name=job,
        base_version=1,
        target_version=2,
        plan={"counts_before": before, "counts_after": after, "streams_grown": [grown]},
        status=ExpansionStatus.PLANNED,
        owner="test",
        created_at=stamp,
        updated_at=stamp,
        results={"plan": {"conformance": {grown: {"partitioner": "crc32"}}}},
    )
    store.put_expansion(record, expected_revision=0)
    return record.expansion_id


@pytest.fixture
def setup(config, admin, unique_topic, tmp_path):
    """A 2-partition topic with traffic, its planned expansion 2 -> 4 in a typed store."""
    topic, job = unique_topic("orders"), unique_topic("job")
    admin.ensure_topic(topic, 2)
    produce(config, topic, [(b"k%d" % i, b"{}", crc32_partition(b"k%d" % i, 2)) for i in range(30)])
    store = FileCoordinatorStore(str(tmp_path / "store"), job)
    return topic, store, _planned(store, job, topic, {topic: 2}, {topic: 4})


def _snapshot_look(admin, store, expansion_id: str, quiet_s: float):
    """One barrier snapshot poll with the grace already over."""
    from airflow_samza_expand._protocol.barrier import step as barrier

    return barrier.snapshot_poll(
        admin, store, expansion_id=expansion_id, group="g", grace_ends=time.time() - 1,
        stale_quiet_s=quiet_s,
    )  # fmt: skip


def _moved(n, prefix):
    keys = (f"{prefix}-{i}".encode() for i in range(10_000))
    return [k for k in keys if crc32_partition(k, 2) != crc32_partition(k, 4)][:n]


def poll(admin, config, store, expansion_id, now):
    return order_poll(
        admin,
        store,
        config,
        expansion_id=expansion_id,
        expanded_at=T0,
        grace_ends=T0 + GRACE,
        deadline=T0 + 600,
        stale_quiet_s=QUIET,
        now=T0 + now,
    )


def test_barrier_waits_while_stale_placements_arrive(config, admin, setup):
    topic, store, expansion_id = setup
    start = record_scan_start(admin, store, expansion_id)
    assert start.scan_start == snapshot_barrier(admin, {topic: 2})  # the ends, before growth
    assert start.partitioner == ("crc32",)
    admin.create_partitions(topic, 4)
    # a rerun of the expand step keeps the first start
    assert record_scan_start(admin, store, expansion_id).scan_start == start.scan_start

    held = _moved(4, "held")
    produce(config, topic, [(k, b"{}", crc32_partition(k, 2)) for k in held])
    first = poll(admin, config, store, expansion_id, now=50)
    assert first.decision.action == "wait" and "grace" in first.decision.reason
    assert sorted(p.key for p in first.found) == sorted(k.decode() for k in held)

    # more stale placements just after the grace: the barrier waits a quiet window longer
    late = _moved(2, "late")
    produce(config, topic, [(k, b"{}", crc32_partition(k, 2)) for k in late])
    second = poll(admin, config, store, expansion_id, now=GRACE + 5)
    assert second.decision.action == "wait"
    assert "stale placements still arriving (6 so far" in second.decision.reason
    assert len(second.found) == 2

    # fresh traffic only afterwards: the quiet window ends, the barrier may snapshot
    produce(config, topic, [(b"f%d" % i, b"{}", crc32_partition(b"f%d" % i, 4)) for i in range(20)])
    assert (
        poll(admin, config, store, expansion_id, now=GRACE + 5 + QUIET - 1).decision.action
        == "wait"
    )
    done = poll(admin, config, store, expansion_id, now=GRACE + 5 + QUIET)
    assert done.decision.action == "snapshot" and done.found == ()
    assert "6 stale placement(s) before it, held by the barrier" in done.decision.reason

    evidence = OrderEvidence.from_dict(store.get_expansion(expansion_id).stale_placements)
    assert evidence.before_snapshot.records == 6
    assert evidence.scan_positions == snapshot_barrier(admin, {topic: 2})
    assert order_summary(store.get_expansion(expansion_id))["line"] == (
        "order: proven (0 stale placements after the snapshot; 6 before it, held by the barrier)"
    )


def test_fresh_producers_snapshot_at_the_end_of_the_grace(config, admin, setup):
    topic, store, expansion_id = setup
    record_scan_start(admin, store, expansion_id)
    admin.create_partitions(topic, 4)
    produce(config, topic, [(b"f%d" % i, b"{}", crc32_partition(b"f%d" % i, 4)) for i in range(40)])
    assert poll(admin, config, store, expansion_id, now=GRACE - 1).decision.action == "wait"
    done = poll(admin, config, store, expansion_id, now=GRACE)
    assert done.decision.action == "snapshot" and done.evidence.before_snapshot.records == 0


def test_without_a_scan_start_the_scan_starts_now(config, admin, setup, caplog):
    topic, store, expansion_id = setup
    admin.create_partitions(topic, 4)
    result = poll(admin, config, store, expansion_id, now=GRACE)
    assert "has no scan start" in caplog.text
    assert result.evidence.scan_start == snapshot_barrier(admin, {topic: 2})


def test_timeout_while_a_producer_never_refreshes(config, admin, setup):
    topic, store, expansion_id = setup
    record_scan_start(admin, store, expansion_id)
    admin.create_partitions(topic, 4)
    produce(config, topic, [(k, b"{}", crc32_partition(k, 2)) for k in _moved(1, "x")])
    result = order_poll(
        admin, store, config, expansion_id=expansion_id, expanded_at=T0,
        grace_ends=T0 + GRACE, deadline=T0 + GRACE, stale_quiet_s=QUIET, now=T0 + GRACE,
    )  # fmt: skip
    assert result.decision.action == "timeout"
    assert "stale placements still arriving (1 so far" in result.decision.reason


def test_job_args_and_the_jobs_counts_in_the_record(config, admin, setup):
    topic, store, expansion_id = setup
    record = store.get_expansion(expansion_id)
    assert job_order_args(record) == []  # no snapshot yet
    barrier = {topic: {0: 15, 1: 15}}
    record = store.put_expansion(
        dataclasses.replace(record, barrier=barrier), expected_revision=record.revision
    )
    args = job_order_args(record, "fail")
    assert args[:2] == ["--barrier-offsets", json.dumps({topic: {"0": 15, "1": 15}})]
    assert args[2:] == ["--partitioner", "crc32", "--on-stale-placement", "fail"]
    with pytest.raises(ValueError, match="give 'warn'"):
        job_order_args(record, "ignore")

    publish = job_publisher(store, 2)
    assert publish is not None and job_publisher(store, 3) is None
    summary = StaleSummary().add([StalePlacement(topic, 1, 20, "token-9", 3)])
    publish(summary)
    line = order_summary(store.get_expansion(expansion_id))["line"]
    assert line.startswith("order: at risk - 1 records of 1 keys (examples key 'token-9'")


def test_wired_expand_records_the_scan_start_and_snapshot_poll_holds(config, admin, setup):
    """The protocol's own steps: expand records where the scan starts (before the growth);
    snapshot_poll waits out stale placements, then reports how many it held; the report
    renders the order line."""
    from airflow_samza_expand._protocol.steps.expand import ExpandRequest, expand
    from airflow_samza_expand._protocol.steps.report import build_summary, render_summary

    topic, store, expansion_id = setup
    before = snapshot_barrier(admin, {topic: 2})
    expand(admin, store, ExpandRequest(topic=topic, target=4), expansion_id=expansion_id)
    evidence = OrderEvidence.from_dict(store.get_expansion(expansion_id).stale_placements)
    assert evidence.scan_start == before
    produce(config, topic, [(k, b"{}", crc32_partition(k, 2)) for k in _moved(3, "w")])

    def look(quiet_s):
        return _snapshot_look(admin, store, expansion_id, quiet_s)

    waiting = look(60.0)
    assert not waiting.done and "stale placements still arriving (3 so far" in waiting.message
    assert waiting.detail["stale_before_snapshot"] == 3
    done = look(0.0)
    assert done.done and done.result["stale_before_snapshot"] == 3
    record = store.get_expansion(expansion_id)
    summary = build_summary(record, {}, run_mode="continuous", history=[1], dry_run=False)
    assert summary["order"]["stale_before_snapshot"] == 3
    assert render_summary(summary).endswith(
        "order: proven (0 stale placements after the snapshot; 3 before it, held by the barrier)"
    )


@pytest.fixture
def two_streams(config, admin, unique_topic, tmp_path):
    """A job reading two co-partitioned streams; only ``orders`` grows (2 -> 4)."""
    orders, payments, job = unique_topic("orders"), unique_topic("payments"), unique_topic("job")
    for topic in (orders, payments):
        admin.ensure_topic(topic, 2)
        keys = [b"k%d" % i for i in range(20)]
        produce(config, topic, [(k, b"{}", crc32_partition(k, 2)) for k in keys])
    store = FileCoordinatorStore(str(tmp_path / "store"), job)
    before, after = {orders: 2, payments: 2}, {orders: 4, payments: 2}
    return orders, payments, store, _planned(store, job, orders, before, after)


def test_a_stream_that_stays_is_outside_the_barrier_and_the_order_check(config, admin, two_streams):
    """Issue: growing one of two streams failed the barrier ('growth 2 -> 2 is not a
    power-of-two multiple'). Only the grown stream is scanned, snapshot and checked."""
    from airflow_samza_expand._protocol.barrier.evidence import scan_after_snapshot
    from airflow_samza_expand._protocol.steps.expand import ExpandRequest, expand

    orders, payments, store, expansion_id = two_streams
    expand(admin, store, ExpandRequest(topic=orders, target=4), expansion_id=expansion_id)
    evidence = OrderEvidence.from_dict(store.get_expansion(expansion_id).stale_placements)
    assert set(evidence.scan_start) == {orders}
    produce(config, orders, [(k, b"{}", crc32_partition(k, 2)) for k in _moved(2, "o")])
    paid = [b"p%d" % i for i in range(9)]
    produce(config, payments, [(k, b"{}", crc32_partition(k, 2)) for k in paid])

    def look(quiet_s):
        return _snapshot_look(admin, store, expansion_id, quiet_s)

    waiting = look(60.0)
    assert not waiting.done and waiting.detail["stale_before_snapshot"] == 2
    done = look(0.0)
    assert done.done and set(done.result["barrier_offsets"]) == {orders}
    record = store.get_expansion(expansion_id)
    assert set(record.barrier) == {orders}
    args = job_order_args(record)
    assert set(json.loads(args[1])) == {orders}
    assert scan_after_snapshot(admin, record) is not None
    assert admin.partition_counts([payments]) == {payments: 2}


def test_held_stale_placements_are_one_info_line_per_poll(config, admin, setup, caplog):
    """Before the snapshot nothing is at risk: one summary line per poll, not one per record."""
    topic, store, expansion_id = setup
    record_scan_start(admin, store, expansion_id)
    admin.create_partitions(topic, 4)
    held = _moved(25, "held")
    produce(config, topic, [(k, b"{}", crc32_partition(k, 2)) for k in held])
    caplog.set_level(logging.INFO, logger=EVIDENCE_LOG)
    first = poll(admin, config, store, expansion_id, now=50)
    assert len(first.found) == 25
    lines = [r for r in caplog.records if r.name == EVIDENCE_LOG]
    assert [r.levelno for r in lines] == [logging.INFO]
    line = lines[0].getMessage()
    assert "25 stale placement(s) of 25 key(s) held by the barrier" in line
    assert "25 so far" in line
    assert 1 <= sum(repr(k.decode()) in line for k in held) <= 3  # a few example keys

    caplog.clear()
    produce(config, topic, [(k, b"{}", crc32_partition(k, 2)) for k in held[:2]])
    poll(admin, config, store, expansion_id, now=55)
    (second,) = [r for r in caplog.records if r.name == EVIDENCE_LOG]
    assert "2 stale placement(s) of 2 key(s)" in second.getMessage()
    assert "27 so far" in second.getMessage()


def test_stale_placements_after_the_snapshot_stay_one_warning_each(config, admin, setup, caplog):
    """Unlike the held ones, a stale placement beyond the barrier puts its key's order at risk:
    the report's scan logs each one as a warning."""
    from airflow_samza_expand._protocol.barrier import step as barrier
    from airflow_samza_expand._protocol.barrier.evidence import scan_after_snapshot
    from airflow_samza_expand._protocol.steps.expand import ExpandRequest, expand

    topic, store, expansion_id = setup
    expand(admin, store, ExpandRequest(topic=topic, target=4), expansion_id=expansion_id)
    done = barrier.snapshot_poll(
        admin, store, expansion_id=expansion_id, group="g", grace_ends=time.time() - 1,
        stale_quiet_s=0.0,
    )  # fmt: skip
    assert done.done
    late = _moved(3, "late")
    produce(config, topic, [(k, b"{}", crc32_partition(k, 2)) for k in late])
    caplog.set_level(logging.INFO, logger=EVIDENCE_LOG)
    scanned = scan_after_snapshot(admin, store.get_expansion(expansion_id))
    assert scanned is not None and scanned.records == 3
    warned = [r for r in caplog.records if "after the snapshot: order at risk" in r.getMessage()]
    assert len(warned) == 3 and {r.levelno for r in warned} == {logging.WARNING}


@pytest.mark.parametrize("mode", ["warm", "in-place"])
def test_in_place_barrier_passes_at_the_snapshot_without_the_drain(config, admin, setup, mode):
    """docs/design.md 'The switch in place': the job itself reads a child only once it passed its
    parent's snapshot, so the barrier holds at the snapshot; a restart waits for the drain (the
    group ``g`` committed nothing of the 30 records). The report names the restart."""
    from airflow_samza_expand._protocol.barrier import step as barrier
    from airflow_samza_expand._protocol.steps.expand import ExpandRequest, expand
    from airflow_samza_expand._protocol.steps.report import build_summary, render_summary

    topic, store, expansion_id = setup
    record = store.get_expansion(expansion_id)
    choice = {"mode": mode, "requested": "auto", "reason": "test"}
    plan = {**record.results["plan"], "restart": choice}
    store.put_expansion(record.with_result("plan", plan), expected_revision=record.revision)
    # the expand step (the record's own status follows: a barrier after a bare growth is refused)
    expand(admin, store, ExpandRequest(topic=topic, target=4), expansion_id=expansion_id)
    result = barrier.barrier_poll(
        admin, store, expansion_id=expansion_id, group="g", grace_ends=time.time() - 1,
        stale_quiet_s=0.0,
    )  # fmt: skip
    assert result.done == (mode == "in-place"), result.message
    summary = build_summary(
        store.get_expansion(expansion_id), {}, run_mode="continuous", history=[1], dry_run=False
    )
    assert f"Restart: {mode} (test)" in render_summary(summary)
