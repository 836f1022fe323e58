"""End to end with a job of the user's own (`examples/user_job.py` on `spark.runtime`): Spark's
Kafka source (and the provider's reader), state in ``applyInPandasWithState`` keyed by the
record key, expanded 2 -> 4 -> 8 by the expansion DAG with the default restart (``auto``: the
runtime advertises the standby capability, so a warm handover) under live keyed traffic. The
verifier: exact per-key counts, no sequence violation, no count ever went back, partitions
2..7 consumed, job model history v1..v3, order proven."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.timeout(1500)]

USER_JOB = str(Path(__file__).resolve().parents[2] / "airflow_samza_expand/examples/user_job.py")
CHAIN_OK = {"plan", "expand", "barrier", "stop_job", "write_job_model", "submit", "ack", "report"}


@pytest.mark.parametrize("source", ["kafka", "python"])
def test_user_job_expanded_twice_with_the_warm_handover(scenario, source) -> None:
    s = scenario(application=USER_JOB, application_args=("--source", source))
    s.start_producer()
    s.start_job()
    outcomes = [s.expand() for _ in range(2)]
    for outcome in outcomes:
        print(f"[e2e] user job ({source}) {outcome.counts}: {outcome.state} {outcome.tasks}")
        assert outcome.state == "success", outcome.tasks
        assert {t for t, st in outcome.tasks.items() if st == "success"} >= CHAIN_OK
        assert outcome.summary["order"]["order"] == "proven", outcome.summary["order"]["line"]
    # rule 1.8: the runtime says it can wait as a standby, so "auto" chose the warm handover
    assert [o.handover for o in outcomes] == [True, True], outcomes
    result = s.finish(expected_versions=[1, 2, 3])
    print(f"[e2e] user job ({source}): {result.describe()}")
    assert result.ok, result.describe()
    assert result.records_produced > 0 and result.records_counted == result.records_produced
    assert not result.count_resets and not result.order_violations
    assert set(range(2, 8)) <= set(result.partitions_consumed)
    assert s.models[-1].partition_counts() == {s.topic: 8}
    assert s.models[-1].tasks() == ["Partition 0", "Partition 1"]
