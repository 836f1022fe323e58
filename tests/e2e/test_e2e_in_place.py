"""End to end, the switch in place (rule 1.9): the shipped job (the provider's reader, so it
advertises ``in-place``) expanded 2 -> 4 -> 8 by the expansion DAG with the default restart
(``auto`` chooses in-place) under live keyed traffic. Nothing stops, nothing restarts: the same
job process runs before, between and after; exact per-key counts, no sequence violation, no
count ever went back, partitions 2..7 consumed, job model history v1..v3."""

from __future__ import annotations

import os

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.timeout(900)]

CHAIN_OK = {"plan", "expand", "barrier", "stop_job", "write_job_model", "submit", "ack", "report"}


def test_shipped_job_expanded_twice_in_place_without_a_restart(scenario) -> None:
    from airflow_samza_expand.core.liveness import statuses

    s = scenario(run_mode="continuous", handover="auto", grace_s=3.0, poll_s=0.5)
    s.start_producer()
    s.start_job()
    pid = int(s.job.handle["pid"])
    (processor,) = statuses(s.store.processors())  # the one processor of v1
    for version in (2, 3):
        outcome = s.expand()
        print(f"[e2e] in place {outcome.counts}: {outcome.state} {outcome.wall_s:.1f}s")
        assert outcome.state == "success", outcome.tasks
        assert {t for t, st in outcome.tasks.items() if st == "success"} >= CHAIN_OK
        # rule 1.8: the running job can switch, so "auto" chose in-place
        assert outcome.summary["restart"]["mode"] == "in-place", outcome.summary["restart"]
        assert "pid" not in (outcome.summary["submit"] or {}), outcome.summary["submit"]
        assert int(s.job.handle["pid"]) == pid  # no launch replaced the job
        os.kill(pid, 0)  # the same process still runs
        seen = statuses(s.store.processors())
        assert list(seen) == [processor], seen  # no second processor ever heartbeated
        assert (seen[processor].job_model_version, seen[processor].state) == (version, "running")
    result = s.finish(expected_versions=[1, 2, 3])
    print(f"[e2e] in place: {result.describe()}")
    assert result.ok, result.describe()
    assert result.records_produced > 0 and result.records_counted == result.records_produced
    assert not result.count_resets and not result.order_violations
    assert set(range(2, 8)) <= set(result.partitions_consumed)
    assert s.models[-1].partition_counts() == {s.topic: 8}
