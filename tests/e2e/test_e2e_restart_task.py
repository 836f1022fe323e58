"""End to end: a job that can only be restarted is restarted by a task the user supplies
(``restart_task=``), never by the DAG's own spark-submit.

The job is the example user job handing ``job.run`` its *started* query (``--restart-only``)
without the runtime's lease (``--no-lease``): it advertises nothing the DAG could use (no in
place, no in-app, no standby) - what a job deployed by the user's own tooling looks like. The
factory DAG gets the default restart (``auto``) and a restart task of the test's own (a
``PythonOperator`` that launches the job, as a ``KubernetesPodOperator`` or a deploy script
would): the plan records ``task``, the stop step stops v1, the write step writes v2, the
submit step launches nothing and the user's task starts v2; the ack waits for v2's heartbeat.
Exact counts, per-key order, no count reset, the new partitions consumed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.timeout(1200)]

USER_JOB = str(Path(__file__).resolve().parents[2] / "airflow_samza_expand/examples/user_job.py")


def test_a_job_that_can_only_be_restarted_is_started_by_the_users_own_task(
    scenario, tmp_path
) -> None:
    from airflow.providers.standard.operators.python import PythonOperator

    from airflow_samza_expand.core._liveness import statuses

    launched = tmp_path / "launched.json"
    made: dict = {}

    def start_job() -> None:
        """The user's "start vN+1": launch the job (it reads the newest job model)."""
        handle = made["scenario"].job.launch()
        launched.write_text(json.dumps(handle))

    def restart_task(job_name: str) -> PythonOperator:
        return PythonOperator(task_id="start_job", python_callable=start_job)

    s = scenario(
        application=USER_JOB,
        application_args=("--source", "kafka", "--restart-only", "--no-lease"),
        restart="auto",
        restart_task=restart_task,
    )
    made["scenario"] = s
    s.start_producer()
    s.start_job()
    first = dict(s.job.handle)
    (v1,) = statuses(s.store.processors()).values()
    assert v1.capabilities == (), v1  # nothing the DAG could use: it can only be restarted
    outcome = s.expand()
    print(f"[e2e] restart task: {outcome.state} {outcome.tasks} restart {outcome.restart}")
    assert outcome.state == "success", outcome.tasks
    assert outcome.restart == "task", outcome.summary
    assert outcome.tasks["start_job"] == "success", outcome.tasks
    assert "pid" not in (outcome.summary["submit"] or {}), outcome.summary["submit"]
    assert not sorted(p.name for p in Path(s.log_dir).rglob("spark-submit-*.log"))
    handle = json.loads(launched.read_text())  # the user's task launched the job, once
    assert handle["pid"] != first["pid"], (first, handle)
    s.job.handle = handle
    running = [p for p in statuses(s.store.processors()).values() if p.state == "running"]
    assert [p.job_model_version for p in running] == [2], running
    result = s.finish(expected_versions=[1, 2])
    print(f"[e2e] restart task: {result.describe()}")
    assert result.ok, result.describe()
    assert result.records_counted == result.records_produced > 0
    assert not result.count_resets and not result.order_violations
    assert {2, 3} <= set(result.partitions_consumed)
