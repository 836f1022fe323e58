"""A step that fails after the topic has grown says where the expansion stands and what to do:
a real DAG run (dag.test()) whose barrier times out because the job never commits, then the
report of the run that goes on shows the earlier failure."""

from __future__ import annotations

from datetime import datetime

import pytest
from airflow.sdk import DAG
from airflow_env import task_states
from kafka_helpers import produce_keyed

from airflow_samza_expand._protocol.steps.report import build_summary, render_summary
from airflow_samza_expand.airflow._failure import on_step_failure
from airflow_samza_expand.airflow.operators import ExpandPartitionsOperator, PlanExpansionOperator
from airflow_samza_expand.airflow.sensors import OrderingBarrierSensor
from airflow_samza_expand.dags import build_expansion_dag

pytestmark = pytest.mark.kafka

EXPANSION_ID = "{{ ti.xcom_pull(task_ids='plan')['expansion_id'] }}"


def _dag(job_name: str, topic: str) -> DAG:
    with DAG(dag_id=f"fail_{job_name}", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        plan = PlanExpansionOperator(task_id="plan", job_name=job_name, targets={topic: 4})
        expand = ExpandPartitionsOperator(
            task_id="expand", topic=topic, factor=2, job_name=job_name,
            expansion_id=EXPANSION_ID, on_failure_callback=on_step_failure,
        )  # fmt: skip
        barrier = OrderingBarrierSensor(
            task_id="barrier", job_name=job_name, expansion_id=EXPANSION_ID,
            producer_refresh_grace_s=0, barrier_timeout_s=1.0, deferrable=False,
            poke_interval=0.3, on_failure_callback=on_step_failure,
        )  # fmt: skip
        plan >> expand >> barrier
    return dag


def test_a_failed_barrier_after_the_growth_logs_and_keeps_the_state_and_the_fix(job, run_dag):
    j = job(2)
    produce_keyed(j.config, j.topic, 40)  # nothing committed: the barrier cannot hold
    j.store.heartbeat("processor-0", 1, "running")
    run = run_dag(_dag(j.name, j.topic))
    assert task_states(run) == {"plan": "success", "expand": "success", "barrier": "failed"}
    (record,) = j.store.expansions()
    (failure,) = record.results["failures"]
    assert failure["step"] == "barrier"
    text = "\n".join(failure["lines"])
    assert "BarrierTimeoutError" in failure["lines"][0]
    assert f"topic: grown {j.topic} 2 -> 4" in text
    assert "job model: v1 in force (v2 not written)" in text
    assert "processor-0 (running" in text
    assert f"records in {j.topic} partitions [2, 3] wait there (nothing is lost" in text
    assert "clear the failed task ('barrier', with its downstream tasks)" in text
    # the report of the run that goes on (after the clear) shows it
    summary = build_summary(record, {}, run_mode="continuous", history=[1, 2], dry_run=False)
    assert summary["failures"][0]["step"] == "barrier"
    assert "Earlier failure of step barrier at" in render_summary(summary)


def test_the_factory_puts_the_failure_callback_on_every_step() -> None:
    from airflow_samza_expand.dags import JobSettings

    job = JobSettings(name="j", topics="t", application_args=["--job-name", "j"])
    dag = build_expansion_dag("d", job=job)
    for task_id in ("plan", "expand", "barrier", "stop_job", "write_job_model", "submit", "ack"):
        assert on_step_failure in list(dag.task_dict[task_id].on_failure_callback or []), task_id
