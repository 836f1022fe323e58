"""Reliability: the expansion DAG run is stopped after a task, then run again; the job still
ends with exact per-key counts and no sequence violation.

Each case is the next x2 expansion of a live job's topic, interrupted at its own point, then
checked at a quiet point (producer paused until the job has processed everything) - exact
counts, no violation, no count going back, every partition consumed, the job model history.
One continuous job with a live producer is shared by the cases (a Spark restart per case
instead of a whole new stack): 2 -> 4 -> 8 -> 16.

The cases are the points where the real job's restart is at stake (vN+1 written with the job
down; the restarted job already running; the barrier passed with vN still running). The other
interruption points are proven elsewhere, without a second real-Spark run of each in the
default suite: every step SIGKILLed through real task processes and the run cleared
(tests/airflow/test_airflow_faults.py: plan, expand, standby, barrier, stop, write, submit, ack,
report), the snapshot reused after a barrier timeout (tests/claims/test_claims_barrier_retry.py),
and every step of every restart strategy with the real job under live traffic, exact counts and
order (benchmarks/fault_matrix.py; its CI subset in tests/airflow/test_airflow_fault_matrix.py).
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.timeout(1200)]

# where the first run stops
INTERRUPTIONS = [
    "write_job_model",  # vN+1 written, job down: rerun resumes (plan), no stop, submits
    "submit",  # restarted job runs vN+1: rerun neither stops nor launches it again
    "barrier",  # barrier passed: rerun finds it passed and stops the job
]


@pytest.fixture(scope="module")
def live_job(e2e_airflow, kafka_bootstrap, tmp_path_factory):
    """A continuous job on v1 with a live producer, shared by the cases."""
    import airflow_env

    from airflow_samza_expand._demo.scenario import Scenario, ScenarioConfig

    s = Scenario(
        ScenarioConfig(bootstrap=kafka_bootstrap, work_dir=tmp_path_factory.mktemp("chain")),
        run_dag=airflow_env.run_dag_test,
        task_states=airflow_env.task_states,
        xcom=airflow_env.task_instance_xcom,
        log=lambda line: print(f"[reliability] {line}", flush=True),
    )
    try:
        s.setup()
        s.start_producer()
        s.start_job()
        yield s
    finally:
        s.close()


@pytest.mark.parametrize("stop_after", INTERRUPTIONS)
def test_rerun_after_an_interrupted_expansion_keeps_exact_counts(live_job, stop_after) -> None:
    s = live_job
    before = s.store.latest_job_model()
    outcome = s.expand(stop_after=stop_after)
    assert outcome.state == "success", outcome.tasks
    first = s.interrupted_states
    assert first[stop_after] == "success" and len(first) < len(outcome.tasks), first
    after = s.store.latest_job_model()
    assert after.version == before.version + 1
    assert after.partition_counts()[s.topic] == 2 * before.partition_counts()[s.topic]
    assert after.tasks() == ["Partition 0", "Partition 1"]
    if stop_after in ("write_job_model", "submit"):
        assert outcome.summary["resumed"] is True
    result = s.verify_at_quiet_point(expected_versions=list(range(1, after.version + 1)))
    print(f"[reliability] after {stop_after}: {result.describe()}")
    assert result.ok, result.describe()
    assert result.records_counted == result.records_produced > 0
