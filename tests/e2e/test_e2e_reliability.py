"""Reliability: the expansion DAG run is stopped after each task (and once mid-barrier), then run
again; the job still ends with exact per-key counts and no sequence violation.

Each case is the next x2 expansion of a live job's topic, interrupted at its own point, then
checked at a quiet point (producer paused until the job has processed everything) - exact
counts, no violation, no count going back, every partition consumed, the job model history.
To keep the runtime down, a continuous job with a live producer is shared by consecutive cases
(a Spark restart per case instead of a whole new stack): chain A grows 2 -> 4 -> ... -> 64 over
five cases, chain B 2 -> 4 -> 8 -> 16 over the other three (one chain for all eight would reach
512 partitions). The cases run in order; "after report" is a finished run and needs no case.
"""

from __future__ import annotations

import pytest

from airflow_samza_expand.demo.scenario import MID_BARRIER

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.timeout(1200)]

# (chain, where the first run stops)
INTERRUPTIONS = [
    ("A", "plan"),  # rerun reuses the planned expansion record
    ("A", MID_BARRIER),  # snapshot taken, then the run gave up: rerun reuses the snapshot
    ("A", "stop_job"),  # job stopped, vN+1 not written: rerun writes, submits
    ("A", "write_job_model"),  # vN+1 written, job down: rerun resumes (plan), no stop, submits
    ("A", "submit"),  # restarted job runs vN+1: rerun neither stops nor launches it again
    ("B", "expand"),  # topic grown, no barrier yet: grace counts from the recorded expansion
    ("B", "barrier"),  # barrier passed: rerun finds it passed and stops the job
    ("B", "ack"),  # restarted job acknowledged, no report: rerun completes the expansion
]


class _Chains:
    """One live job per chain, started on first use; the previous chain's job is closed."""

    def __init__(self, make) -> None:
        self.make = make
        self.current: tuple[str, object] | None = None

    def get(self, chain: str):
        if self.current is not None and self.current[0] == chain:
            return self.current[1]
        self.close()
        scenario = self.make(chain)
        self.current = (chain, scenario)
        return scenario

    def close(self) -> None:
        if self.current is not None:
            self.current[1].close()
            self.current = None


@pytest.fixture(scope="module")
def live_jobs(e2e_airflow, kafka_bootstrap, tmp_path_factory):
    """Continuous jobs on v1 with live producers, one per chain, shared by the cases."""
    import airflow_env

    from airflow_samza_expand.demo.scenario import Scenario, ScenarioConfig

    def make(chain: str) -> Scenario:
        s = Scenario(
            ScenarioConfig(
                bootstrap=kafka_bootstrap, work_dir=tmp_path_factory.mktemp(f"chain-{chain}")
            ),
            run_dag=airflow_env.run_dag_test,
            task_states=airflow_env.task_states,
            xcom=airflow_env.task_instance_xcom,
            log=lambda line: print(f"[reliability {chain}] {line}", flush=True),
        )
        try:
            s.setup()
            s.start_producer()
            s.start_job()
        except BaseException:
            s.close()
            raise
        return s

    chains = _Chains(make)
    yield chains
    chains.close()


@pytest.mark.parametrize(("chain", "stop_after"), INTERRUPTIONS, ids=lambda v: str(v))
def test_rerun_after_an_interrupted_expansion_keeps_exact_counts(
    live_jobs, chain, stop_after
) -> None:
    s = live_jobs.get(chain)
    before = s.store.latest_job_model()
    outcome = s.expand(stop_after=stop_after)
    assert outcome.state == "success", outcome.tasks
    first = s.interrupted_states
    if stop_after == MID_BARRIER:
        # The first run took the barrier snapshot, then gave up on it (or, rarely, it held at once).
        assert first["barrier"] in ("failed", "success"), first
        record = s.store.get_expansion(outcome.summary["expansion_id"])
        assert record.steps["barrier_snapshot"].ended_at < record.steps["barrier"].ended_at
    else:
        assert first[stop_after] == "success" and len(first) < len(outcome.tasks), first
    after = s.store.latest_job_model()
    assert after.version == before.version + 1
    assert after.partition_counts()[s.topic] == 2 * before.partition_counts()[s.topic]
    assert after.tasks() == ["Partition 0", "Partition 1"]
    if stop_after in ("write_job_model", "submit", "ack"):
        assert outcome.summary["resumed"] is True
    result = s.verify_at_quiet_point(expected_versions=list(range(1, after.version + 1)))
    print(f"[reliability] after {stop_after}: {result.describe()}")
    assert result.ok, result.describe()
    assert result.records_counted == result.records_produced > 0
