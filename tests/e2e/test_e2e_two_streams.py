"""End to end: a job that reads two co-partitioned streams (``orders`` and ``payments``, as
SEP-5's join example) under live keyed traffic on both; the expansion DAG grows only ``orders``
2 -> 4. The barrier, the order check and the report consider only the stream that grows; the
stream that stays is read on as before: exact counts and per-key order on both, ``payments``
keeps its 2 partitions and is consumed to its end, job model v2 reads it unchanged."""

from __future__ import annotations

import pytest

# dev_ci: its subject is the join's mapping, not the Kafka - CI runs it in the rest lane
pytestmark = [
    pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.dev_ci,
    pytest.mark.timeout(1200),
]  # fmt: skip


def test_growing_one_of_two_streams_keeps_both_exact_and_in_order(scenario) -> None:
    # "auto": the shipped job switches in place (the restart is not this test's subject)
    s = scenario(run_mode="continuous", second_stream=True, keys=20, rate=40.0, handover="auto")
    payments = s.other_topic
    s.start_producer()
    s.start_job()
    outcome = s.expand()
    print(f"[e2e] two streams: {outcome.state} {outcome.tasks}")
    assert outcome.state == "success", outcome.tasks
    assert outcome.summary["order"]["order"] == "proven", outcome.summary["order"]["line"]
    assert outcome.summary["restart"]["mode"] == "in-place", outcome.summary["restart"]
    record = s.store.expansions()[0]
    assert set(record.barrier) == {s.topic}  # the stream that stays has no barrier
    assert s.admin.partition_counts([s.topic, payments]) == {s.topic: 4, payments: 2}
    result = s.finish(expected_versions=[1, 2])
    print(f"[e2e] two streams: {result.describe()}")
    assert result.ok, result.describe()
    assert result.records_counted == result.records_produced > 0
    assert any(k.startswith("pay-") for k in s.other_producer.snapshot())
    assert set(range(4)) <= set(result.partitions_consumed)
    assert result.other_partitions_consumed == {payments: [0, 1]}
    v2 = s.models[-1]
    assert v2.partition_counts() == {s.topic: 4, payments: 2}
    assert v2.tasks() == ["Partition 0", "Partition 1"]
