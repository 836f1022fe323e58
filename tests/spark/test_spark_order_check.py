"""The restarted job's order check without Spark: a real broker, the driver-side check
of the committed ranges beyond the barrier, warn and fail."""

from __future__ import annotations

import dataclasses
import json

import pytest
from spark_helpers import create_topic, grow_topic, produce_raw, put_expansion_record

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.partitioners import crc32_partition
from airflow_samza_expand._protocol.barrier.reads import snapshot_barrier
from airflow_samza_expand._protocol.barrier.stale_scan import StaleScanner
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.spark._stale import (
    OrderCheck,
    StalePlacementError,
    growths_of,
    parse_barrier_offsets,
)
from airflow_samza_expand.spark.job import build_parser

pytestmark = pytest.mark.kafka


def moved_keys(n: int) -> list[str]:
    """Keys whose CRC32 partition changes from 2 to 4 partitions."""
    keys = (f"key-{i}" for i in range(10_000))
    return [k for k in keys if crc32_partition(k.encode(), 2) != crc32_partition(k.encode(), 4)][:n]


@pytest.fixture
def grown(kafka_bootstrap, unique_topic):
    """A topic grown 2 -> 4 after traffic; its barrier snapshot; a scanner for it."""
    topic = unique_topic("in")
    create_topic(kafka_bootstrap, topic, 2)
    keys = [f"key-{i}" for i in range(20)]
    produce_raw(kafka_bootstrap, topic, [(crc32_partition(k.encode(), 2), k, {}) for k in keys])
    grow_topic(kafka_bootstrap, topic, 4)
    admin = KafkaAdmin({"bootstrap.servers": kafka_bootstrap}, timeout_s=15)
    barrier = snapshot_barrier(admin, {topic: 2})
    scanner = StaleScanner({"bootstrap.servers": kafka_bootstrap}, {topic: (2, 4)}, "crc32")
    yield topic, barrier, scanner
    scanner.close()
    admin.close()


def _end(barrier, topic, extra):
    return {topic: {str(p): o + extra.get(p, 0) for p, o in barrier[topic].items()}}


def test_counts_stale_placements_in_the_committed_range_only(kafka_bootstrap, grown, tmp_path):
    topic, barrier, scanner = grown
    stale = moved_keys(3)
    fresh = [k for k in (f"f-{i}" for i in range(40)) if crc32_partition(k.encode(), 4) < 2][:4]
    records = [(crc32_partition(k.encode(), 4), k, {}) for k in fresh]
    records += [(crc32_partition(k.encode(), 2), k, {}) for k in stale + stale[:1]]
    produce_raw(kafka_bootstrap, topic, records)
    per_partition = {p: sum(1 for q, _, _ in records if q == p) for p in range(2)}
    progress = tmp_path / "progress.jsonl"
    published = []
    check = OrderCheck(scanner, barrier, progress_file=str(progress), publish=published.append)

    # a batch that committed nothing beyond the barrier: nothing read
    assert check.after_commit(_end(barrier, topic, {})).records == 0
    summary = check.after_commit(_end(barrier, topic, per_partition))
    assert summary.records == 4
    assert summary.keys == {stale[0]: 2, stale[1]: 1, stale[2]: 1}
    assert published[-1] == summary
    line = json.loads(progress.read_text().splitlines()[-1])
    assert line["stale_placements"]["records"] == 4
    assert line["order"].startswith("order: at risk - 4 records of 3 keys")
    # the next batch re-checks nothing already checked
    assert check.after_commit(_end(barrier, topic, per_partition)).records == 4


def test_records_beyond_the_committed_end_wait_for_their_batch(kafka_bootstrap, grown):
    topic, barrier, scanner = grown
    (key,) = moved_keys(1)
    p = crc32_partition(key.encode(), 2)
    produce_raw(kafka_bootstrap, topic, [(p, key, {})])
    check = OrderCheck(scanner, barrier)
    assert check.after_commit(_end(barrier, topic, {})).records == 0
    assert check.after_commit(_end(barrier, topic, {p: 1})).records == 1


def test_fail_stops_with_the_key_named(kafka_bootstrap, grown):
    topic, barrier, scanner = grown
    (key,) = moved_keys(1)
    p = crc32_partition(key.encode(), 2)
    produce_raw(kafka_bootstrap, topic, [(p, key, {})])
    check = OrderCheck(scanner, barrier, on_stale="fail")
    with pytest.raises(StalePlacementError, match=rf"order: at risk - 1 records of 1 keys.*{key}"):
        check.after_commit(_end(barrier, topic, {p: 1}))


def test_barrier_argument_is_checked_by_the_parser(capsys):
    base = ["--job-name", "j", "--checkpoint-dir", "/tmp/x", "--output-topic", "o"]
    args = build_parser().parse_args([*base, "--barrier-offsets", '{"in": {"0": 5, "1": 7}}'])
    assert args.barrier_offsets == {"in": {0: 5, 1: 7}} and args.on_stale_placement == "warn"
    for bad, why in [
        ("[1]", "not a JSON object"),
        ('{"in": {"1": 5}}', "must list old partitions 0..N-1"),
        ("@/nonexistent/barrier.json", "cannot be read"),
    ]:
        with pytest.raises(SystemExit) as stop:
            build_parser().parse_args([*base, "--barrier-offsets", bad])
        assert stop.value.code == 2
        assert why in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args([*base, "--on-stale-placement", "ignore"])


def test_growths_come_from_the_barrier_and_the_job_model():
    model = JobModel.initial("j", {"in": 8})
    assert growths_of(parse_barrier_offsets('{"in": {"0": 1, "1": 2}}'), model) == {"in": (2, 8)}
    with pytest.raises(ValueError, match="names topic 'other'"):
        growths_of({"other": {0: 1}}, model)


def test_counts_reach_the_expansion_record_of_a_typed_store(kafka_bootstrap, grown, tmp_path):
    """order_check_from_args publishes into the record of the expansion that made the job
    model (its own typed store on --coordinator)."""
    from airflow_samza_expand.core._clock import now_iso
    from airflow_samza_expand.core._order import OrderEvidence
    from airflow_samza_expand.core._record import ExpansionRecord
    from airflow_samza_expand.spark._stale import order_check_from_args
    from airflow_samza_expand.store._files import FileCoordinatorStore

    topic, barrier, _ = grown
    store = FileCoordinatorStore(str(tmp_path / "store"), "job")
    stamp = now_iso()
    record = ExpansionRecord(
        expansion_id="job~in.2-4", job_name="job", base_version=1, target_version=2,
        plan={"counts_before": {topic: 2}, "counts_after": {topic: 4}}, status="expanded",
        owner="test", created_at=stamp, updated_at=stamp, barrier=barrier,
    )  # fmt: skip
    store.put_expansion(record, expected_revision=0)
    model = dataclasses.replace(JobModel.initial("job", {topic: 4}), version=2)
    args = build_parser().parse_args(
        ["--job-name", "job", "--checkpoint-dir", "/tmp/x", "--output-topic", "o",
         "--coordinator", str(tmp_path / "store"),
         "--barrier-offsets", json.dumps({topic: {str(p): o for p, o in barrier[topic].items()}}),
         "--partitioner", "crc32"]
    )  # fmt: skip
    check = order_check_from_args(args, model, {"bootstrap.servers": kafka_bootstrap})
    (key,) = moved_keys(1)
    p = crc32_partition(key.encode(), 2)
    produce_raw(kafka_bootstrap, topic, [(p, key, {})])
    try:
        check.after_commit(_end(barrier, topic, {p: 1}))
    finally:
        check.close()
    evidence = OrderEvidence.from_dict(store.get_expansion("job~in.2-4").stale_placements)
    assert evidence.after_snapshot.keys == {key: 1}


def test_auto_takes_the_barrier_and_partitioner_from_the_record(kafka_bootstrap, grown, tmp_path):
    from airflow_samza_expand.spark._stale import order_check_from_args
    from airflow_samza_expand.store._files import FileCoordinatorStore

    topic, barrier, _ = grown
    store = FileCoordinatorStore(str(tmp_path / "store"), "job")
    put_expansion_record(store, topic, barrier)
    args = build_parser().parse_args(
        ["--job-name", "job", "--checkpoint-dir", "/tmp/x", "--output-topic", "o",
         "--coordinator", str(tmp_path / "store"), "--barrier-offsets", "auto"]
    )  # fmt: skip
    config = {"bootstrap.servers": kafka_bootstrap}
    v1 = JobModel.initial("job", {topic: 2})
    assert order_check_from_args(args, v1, config) is None  # no expansion made v1
    v2 = dataclasses.replace(JobModel.initial("job", {topic: 4}), version=2)
    check = order_check_from_args(args, v2, config)
    try:
        assert check.positions == barrier
        assert check.scanner.partition_of == (crc32_partition,)
        (key,) = moved_keys(1)
        p = crc32_partition(key.encode(), 2)
        produce_raw(kafka_bootstrap, topic, [(p, key, {})])
        assert check.after_commit(_end(barrier, topic, {p: 1})).keys == {key: 1}
    finally:
        check.close()


def test_the_heartbeat_counts_the_stale_placements_per_key(kafka_bootstrap, grown, tmp_path):
    """docs/design.md 'Stale placements': the processor's heartbeat carries its order check's
    counts per key, so the ack step and the UI see the order at risk while the job runs (not only
    in the record)."""
    from airflow_samza_expand.spark._lifecycle import Lifecycle
    from airflow_samza_expand.store._files import FileCoordinatorStore

    topic, barrier, scanner = grown
    store = FileCoordinatorStore(str(tmp_path / "store"), "job")
    config = {"bootstrap.servers": kafka_bootstrap}
    life = Lifecycle(store, "job", "proc-1", config, use_lease=False)
    check = OrderCheck(scanner, barrier)
    life.order_check = check
    life.heartbeat("running")
    assert "stale_placements" not in store.processors()["proc-1"]  # none found: no field
    key = moved_keys(1)[0]
    p = crc32_partition(key.encode(), 2)
    produce_raw(kafka_bootstrap, topic, [(p, key, {}), (p, key, {})])
    check.after_commit(_end(barrier, topic, {p: 2}))
    life.heartbeat("running")
    assert store.processors()["proc-1"]["stale_placements"] == {
        "records": 2,
        "keys": [[key, 2]],
        "keys_truncated": False,
    }
