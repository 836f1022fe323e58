"""Reliability: the expansion DAG run is stopped after a task (or mid-barrier), then run again;
the job still ends with exact per-key counts and no sequence violation.

One continuous job and one live producer serve every case: each case is the next x2 expansion
of the same topic (2 -> 4 -> 8 -> 16 -> 32 -> 64), interrupted at its own point, then checked at
a quiet point (producer paused until the job has processed everything). The cases therefore
run in order and share the module's job (a Spark restart per case instead of a whole new
stack). The subset covers each distinct recovery path (see INTERRUPTIONS); the points left out
recover the same way as a neighbour: after expand as after plan (the record is reused), after
barrier as mid-barrier (the stored snapshot is reused), after ack as after submit (the job
already runs vN+1 and is not launched twice).
"""

from __future__ import annotations

import pytest

from airflow_samza_expand.demo.scenario import MID_BARRIER

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.timeout(1200)]

INTERRUPTIONS = [
    "plan",  # rerun reuses the planned expansion record
    MID_BARRIER,  # barrier snapshot taken, then the run gave up: rerun reuses the snapshot
    "stop_job",  # job stopped, vN+1 not written: rerun writes, submits
    "write_job_model",  # vN+1 written, job down: rerun resumes (plan), no stop, submits
    "submit",  # restarted job runs vN+1: rerun neither stops nor launches it again
]


@pytest.fixture(scope="module")
def live_job(e2e_airflow, kafka_bootstrap, tmp_path_factory):
    """One continuous job on v1 with a live producer, shared by the cases of this module."""
    import airflow_env

    from airflow_samza_expand.demo.scenario import Scenario, ScenarioConfig

    s = Scenario(
        ScenarioConfig(bootstrap=kafka_bootstrap, work_dir=tmp_path_factory.mktemp("reliability")),
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
    if stop_after == MID_BARRIER:
        # The first run took the barrier snapshot, then gave up on it (or, rarely, it held at once).
        assert first["barrier"] in ("failed", "success"), first
        record = s.store.get_expansion(outcome.summary["expansion_id"])
        assert record["barrier_snapshot_at"] < record["barrier_passed_at"]
    else:
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
