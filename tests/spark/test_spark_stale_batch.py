"""Stale placements counted where the records are read anyway (docs/design.md 'Stale placements'
says who counts): the provider's reader counts stale placements beyond the barrier in the job's
micro-batches (vectorised, raw key bytes) and reports them per range; the driver's order check
takes the reports and re-reads nothing."""

from __future__ import annotations

import random

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable
from spark_helpers import create_topic, grow_topic, produce_raw, put_expansion_record

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.partitioners import PARTITIONERS, crc32_partition
from airflow_samza_expand._protocol.barrier.reads import snapshot_barrier
from airflow_samza_expand._protocol.barrier.stale_scan import StaleScanner
from airflow_samza_expand.core._plan import plan_expansion
from airflow_samza_expand.core._stale import StaleSummary, stale_target
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.spark._source import SOURCE_SCHEMA, SamzaKafkaStreamReader
from airflow_samza_expand.spark._stale import BATCHES, SCAN, OrderCheck, stale_rule
from airflow_samza_expand.spark._stale_batch import (
    StaleRule,
    count_stale,
    take_reports,
    write_report,
)

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("partitioners", [("crc32",), ("murmur2",), None])
def test_vectorised_count_matches_the_per_record_rule(partitioners, tmp_path) -> None:
    rng = random.Random(7)
    keys = [rng.choice([None, b"", *(f"k-{i}".encode() for i in range(300))]) for _ in range(5000)]
    keys += [b"\xff\xfe-not-utf8"] * 3
    offsets = list(range(100, 100 + len(keys)))
    rule = StaleRule(2, str(tmp_path), {"t": {0: 0, 1: 1000}}, {"t": 8}, partitioners)
    names = partitioners or sorted(PARTITIONERS)
    candidates = [PARTITIONERS[n] for n in names]
    for partition in (0, 1):
        start = rule.check_from["t"][partition]
        expected = StaleSummary()
        for offset, key in zip(offsets, keys, strict=True):
            target = stale_target(
                key, partition, offset, start_offset=start, old_count=2, new_count=8,
                partition_of=candidates,
            )  # fmt: skip
            if target is not None:
                expected = expected.add([_placement(partition, offset, key, target)])
        got = count_stale(rule, "t", partition, offsets, keys)
        assert got.records == expected.records > 0
        assert got.keys == expected.keys and got.keys_truncated == expected.keys_truncated
        assert got.examples == expected.examples
        assert got.last_offset == expected.last_offset


def _placement(partition: int, offset: int, key: bytes, target: int, topic: str = "t"):
    from airflow_samza_expand.core._stale import StalePlacement

    return StalePlacement(topic, partition, offset, key.decode("utf-8", "replace"), target)


def test_reports_chain_from_the_positions_and_wait_for_their_batch(tmp_path) -> None:
    rule = StaleRule(3, str(tmp_path), {"t": {0: 10, 1: 5}}, {"t": 4})
    one = StaleSummary().add([_placement(0, 12, b"a", 2)])
    two = StaleSummary().add([_placement(0, 25, b"b", 2), _placement(0, 26, b"b", 2)])
    assert write_report(rule, "t", 0, 10, 20, one)
    assert write_report(rule, "t", 0, 20, 30, two)
    assert write_report(rule, "t", 1, 9, 12, StaleSummary())  # not from position 5: a gap
    summary, reached, covered = take_reports(
        rule, {"t": {0: 10, 1: 5}}, {"t": {0: 25, 1: 12}}
    )  # [20, 30) ends beyond 25: its batch is not committed yet
    assert (summary.records, reached, covered) == (1, {"t": {0: 20, 1: 5}}, 10)
    summary, reached, covered = take_reports(rule, reached, {"t": {0: 30, 1: 12}})
    assert (summary.records, summary.keys, reached, covered) == (
        2,
        {"b": 2},
        {"t": {0: 30, 1: 5}},
        10,
    )
    assert take_reports(rule, reached, {"t": {0: 30, 1: 12}})[2] == 0  # consumed once


@pytest.mark.kafka
def test_order_check_takes_the_readers_counts_and_scans_nothing(
    kafka_bootstrap, unique_topic, tmp_path
) -> None:
    topic = unique_topic("stale-batch")
    create_topic(kafka_bootstrap, topic, 2)
    produce_raw(kafka_bootstrap, topic, [(p, f"pre-{p}", {}) for p in (0, 1)])
    grow_topic(kafka_bootstrap, topic, 4)
    config = {"bootstrap.servers": kafka_bootstrap}
    with KafkaAdmin(config, timeout_s=15) as admin:
        barrier = snapshot_barrier(admin, {topic: 2})
    moved = [k for k in (f"m-{i}" for i in range(500)) if crc32_partition(k.encode(), 4) >= 2]
    stale = [(crc32_partition(k.encode(), 2), k, {}) for k in moved[:40] for _ in range(2)]
    fresh = [(crc32_partition(k.encode(), 4), k, {}) for k in moved[40:120]]
    produce_raw(kafka_bootstrap, topic, stale + fresh)
    v1 = JobModel.initial("job-" + topic, {topic: 2})
    v2 = plan_expansion(v1, {topic: 2}, {topic: 4}).new_job_model

    def run(rule: StaleRule) -> OrderCheck:
        reader = SamzaKafkaStreamReader(
            SOURCE_SCHEMA,
            {"job_model": v2.to_json(), "bootstrap_servers": kafka_bootstrap,
             "order_check": rule.to_json()},
        )  # fmt: skip
        scanner = StaleScanner(config, {topic: (2, 4)}, "crc32")
        check = OrderCheck(scanner, barrier, rule=rule)
        start = {topic: {str(p): 0 for p in range(4)}}
        end = reader.latestOffset(start, ReadAllAvailable())
        for part in reader.partitions(start, end):
            assert part.rule == (rule if rule.version == v2.version else None)
            for _ in reader.read(part):
                pass
        check.after_commit(end)
        reader.stop()
        check.close()
        return check

    counted = run(stale_rule(v2, barrier, "crc32", str(tmp_path / "a")))
    assert counted.summary.records == 80 and len(counted.summary.keys) == 40
    assert counted.checked[SCAN] == 0 and counted.checked[BATCHES] >= 80
    assert "micro-batches" in counted.counted_by()
    # a rule of another job model reaches no executor: the driver's scan counts the same
    scanned = run(stale_rule(v1, barrier, "crc32", str(tmp_path / "b")))
    assert scanned.summary.records == 80 and scanned.summary.keys == counted.summary.keys
    assert scanned.checked[BATCHES] == 0 and scanned.checked[SCAN] >= 80


@pytest.mark.kafka
def test_a_switch_in_place_starts_the_check_of_the_new_job_models_expansion(
    kafka_bootstrap, unique_topic, tmp_path
) -> None:
    """Without ``--barrier-offsets`` (nothing restarts after an in-place switch) the running
    job takes the check of the expansion that made vN+1, and the reader gets the same rule."""
    from airflow_samza_expand.spark._stale import order_check_after_switch, switch_rule
    from airflow_samza_expand.spark.job import build_parser
    from airflow_samza_expand.store._files import FileCoordinatorStore

    topic = unique_topic("switch-order")
    barrier = {topic: {0: 3, 1: 5}}
    store = FileCoordinatorStore(str(tmp_path / "store"), "job")
    put_expansion_record(store, topic, barrier)
    args = build_parser().parse_args(
        ["--job-name", "job", "--checkpoint-dir", "/tmp/x", "--output-topic", "o",
         "--coordinator", str(tmp_path / "store")]
    )  # fmt: skip
    assert args.barrier_offsets is None
    v1 = JobModel.initial("job", {topic: 2})
    v2 = plan_expansion(v1, {topic: 2}, {topic: 4}).new_job_model
    reports = str(tmp_path / "reports")
    assert switch_rule(store, v1, None, reports) is None  # no expansion made v1
    rule = StaleRule.from_json(switch_rule(store, v2, None, reports))
    assert rule == StaleRule(2, reports, barrier, {topic: 4}, ("crc32",))
    config = {"bootstrap.servers": kafka_bootstrap}
    check = order_check_after_switch(args, v2, config, reports, previous=None)
    try:
        assert check is not None and check.rule == rule and check.positions == barrier
        summary = StaleSummary().add([_placement(0, 4, b"k", 2, topic)])
        assert write_report(rule, topic, 0, 3, 6, summary)
        assert write_report(rule, topic, 1, 5, 7, StaleSummary())
        assert check.after_commit({topic: {"0": 6, "1": 7}}).records == 1
        assert check.checked == {BATCHES: 5, SCAN: 0}
    finally:
        check.close()
