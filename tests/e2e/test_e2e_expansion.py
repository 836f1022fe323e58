"""End to end under live traffic: development broker (or KAFKA_BOOTSTRAP_SERVERS), local Spark,
the expansion DAG run with dag.test(). A keyed producer runs the whole time; the job starts on
job model v1 (2 partitions); the DAG grows the topic 2 -> 4, then 4 -> 8. The verifier then
reads the output and coordinator topics: exact per-key counts, no sequence violation, no count
ever went back, partitions 2..7 consumed, job model history v1..v3, each report's
``order: proven`` (producers refresh within the grace). The naive mapping writer
(plain GroupByPartition) must fail the same check."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.timeout(1500)]

CHAIN_OK = {"plan", "expand", "barrier", "stop_job", "write_job_model", "submit", "ack", "report"}


def _run_expansions(s, expansions: int) -> list:
    s.start_producer()
    s.start_job()
    outcomes = []
    for _ in range(expansions):
        outcome = s.expand()
        print(f"[e2e] expansion {outcome.counts}: {outcome.state} {outcome.tasks}")
        outcomes.append(outcome)
    return outcomes


# continuous: the chain twice (2 -> 4 -> 8); available-now restarts cold, once (2 -> 4): the
# chain's second round is the same code, covered by continuous and tests/e2e/test_e2e_user_job.py
@pytest.mark.parametrize(("run_mode", "expansions"), [("continuous", 2), ("available-now", 1)])
def test_expansion_keeps_exact_counts_and_order_under_live_traffic(
    scenario, run_mode, expansions
) -> None:
    s = scenario(run_mode=run_mode)
    outcomes = _run_expansions(s, expansions)
    versions = list(range(1, expansions + 2))
    final = 2 ** (expansions + 1)
    for outcome in outcomes:
        assert outcome.state == "success", outcome.tasks
        assert {t for t, st in outcome.tasks.items() if st == "success"} >= CHAIN_OK
        # producers refreshing within the grace -> nothing stale after the snapshot
        order = outcome.summary["order"]
        assert order["order"] == "proven", order["line"]
        assert order["line"].startswith("order: proven (0 stale placements after the snapshot")
    result = s.finish(expected_versions=versions)
    print(f"[e2e] {run_mode}: {result.describe()}")
    assert result.ok, result.describe()
    assert result.records_produced > 0 and result.records_counted == result.records_produced
    assert set(range(2, final)) <= set(result.partitions_consumed)
    assert result.job_model_versions == versions
    last = s.models[-1]
    assert last.partition_counts() == {s.topic: final}
    assert last.tasks() == ["Partition 0", "Partition 1"]
    report = outcomes[-1].summary
    assert report["counts_before"] == {s.topic: final // 2}
    assert report["counts_after"] == {s.topic: final}
    assert report["job_model_history"] == versions
    # continuous: the default restart is the handover to the vN+1 standby launched during the
    # grace (the submit step launched nothing); available-now restarts cold
    took_over = [o.standby_took_over for o in outcomes]
    assert took_over == [run_mode == "continuous"] * expansions, outcomes


def test_naive_group_by_partition_writer_fails_the_check(scenario) -> None:
    # in place (the default restart of the shipped job): the running job takes the naive model
    # on, no second Spark start - its moved keys lose their state as after any restart
    s = scenario(run_mode="continuous", naive=True, restart="auto")
    s.start_producer()
    s.start_job()
    outcome = s.expand()  # one expansion: the naive model is (honestly) a plain-grouper model
    assert outcome.state == "success", outcome.tasks
    result = s.finish(expected_versions=[1, 2])
    print(f"[e2e] naive: {result.describe()}")
    assert not result.ok
    assert result.count_mismatches, "moved keys restarted from 0 in new tasks: counts must differ"
    assert result.count_resets or result.order_violations
    assert s.models[-1].tasks() == [f"Partition {p}" for p in range(4)]
    assert s.models[-1].grouper == "GroupByPartition"
    assert outcome.summary["restart"]["mode"] == "in-place", outcome.summary["restart"]
