"""Reliability: the expansion DAG run is stopped after a task, cleared and run again - several
times - and the job still ends with exact per-key counts and no sequence violation.

One x2 expansion (2 -> 4) of a live continuous job's topic under a live producer, its run
interrupted in turn at each point where the real job's restart is at stake, each rerun
stopping at the next: the barrier passed with vN still running (the rerun finds it passed and
stops the job), vN+1 written with the job down (the rerun resumes and submits), the restarted
job running vN+1 (the rerun neither stops nor launches it again); then a whole rerun completes
it. Checked at a quiet point (producer paused until the job has processed everything) - exact
counts, no violation, no count going back, every partition consumed, the job model history.

The other interruption points are proven elsewhere, without a second real-Spark run of each
in the default suite: every step SIGKILLed through real task processes and the run cleared
(tests/airflow/test_airflow_faults.py, the fake job: standby, stop, submit, ack), the snapshot
reused after a barrier timeout (tests/integration/claims/test_claims_barrier_retry.py), and
every step of every restart strategy with the real job under live traffic, exact counts and
order (benchmarks/fault_matrix.py; its CI subset in tests/airflow/test_airflow_fault_matrix.py:
one expansion killed in each in-place step - plan, expand, barrier, write, ack, report).
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.timeout(1200)]

# where the run stops, in turn (each a rerun of the one before, cleared)
INTERRUPTIONS = [
    "barrier",  # barrier passed, vN running: the rerun finds it passed and stops the job
    "write_job_model",  # vN+1 written, job down: the rerun resumes (plan), no stop, submits
    "submit",  # restarted job runs vN+1: the rerun neither stops nor launches it again
]


def test_reruns_after_an_expansion_interrupted_at_each_restart_point_keep_exact_counts(
    scenario,
) -> None:
    s = scenario(run_mode="continuous")
    s.start_producer()
    s.start_job()
    before = s.store.latest_job_model()
    outcome = s.expand(stop_after=INTERRUPTIONS)
    assert outcome.state == "success", outcome.tasks
    assert list(s.interrupted_states) == INTERRUPTIONS, s.interrupted_states
    for point, states in s.interrupted_states.items():
        assert states[point] == "success" and len(states) < len(outcome.tasks), states
    after = s.store.latest_job_model()
    assert after.version == before.version + 1
    assert after.partition_counts()[s.topic] == 2 * before.partition_counts()[s.topic]
    assert after.tasks() == ["Partition 0", "Partition 1"]
    assert outcome.summary["resumed"] is True
    result = s.verify_at_quiet_point(expected_versions=[1, 2])
    print(f"[e2e] after {INTERRUPTIONS}: {result.describe()}")
    assert result.ok, result.describe()
    assert result.records_counted == result.records_produced > 0
