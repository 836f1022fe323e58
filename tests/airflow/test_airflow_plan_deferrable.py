"""``PlanExpansionOperator(deferrable=False)``: the plan's two waits (another run holds the
job's expansion lease; the job is down and the DAG launches nothing) run in the worker, polling
what their triggers poll, and end as the deferred waits do. The default follows Airflow's
``[operators] default_deferrable`` (test_airflow_stop_deferrable.py); the factory lets a DAG's
``default_args`` choose for its plan and stop steps. Real Kafka, real Airflow (``dag.test()``
on SQLite)."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import test_airflow_launch_ownership as launch
from airflow.sdk.exceptions import AirflowFailException, TaskDeferred
from airflow_env import first_event, task_context, task_states

from airflow_samza_expand._protocol.ownership import give_up
from airflow_samza_expand.airflow._shell import holder_of
from airflow_samza_expand.airflow.operators import PlanExpansionOperator
from airflow_samza_expand.dags import JobSettings, RestartSettings, build_expansion_dag


class _Watched(PlanExpansionOperator):
    """The plan, with an event set when its wait in the worker starts (what the test waits on
    before it frees what the plan waits for)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.waiting = threading.Event()

    def _poll_until_event(self, trigger):
        self.waiting.set()
        return super()._poll_until_event(trigger)


def _in_worker(op, context, release):
    """Run ``op`` in a worker thread; once it waits in the worker, ``release()`` what it waits
    for; its outcome (it must never defer)."""
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(op.execute, context)
        try:
            assert op.waiting.wait(120), f"the plan never waited in the worker: {future}"
        finally:
            release()  # also when it failed: the worker thread must end
        return future.result(timeout=180)


def _deferred(op, context, release):
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(context)
    release()
    event = asyncio.run(first_event(deferred.value.trigger, 60)).payload
    return getattr(op, deferred.value.method_name)(context, event)


@pytest.mark.kafka
@pytest.mark.parametrize("deferrable", [True, False])
def test_the_wait_for_another_runs_lease_ends_the_same_deferred_or_in_the_worker(
    job, admin, deferrable
):
    """Another run planned (a cold restart: the job is down) and holds the lease; this run
    waits for it, then goes on with the expansion it joined once the other run let go."""
    j = job(2)
    launch._crashed(j)
    theirs = task_context("plan", dag_id="theirs")
    planned = launch._plan(j, owns_launch=True).execute(theirs)
    mine = task_context("plan", dag_id="mine")
    op = launch._plan(j, owns_launch=True, deferrable=deferrable, cls=_Watched)
    run = _deferred if deferrable else _in_worker
    result = run(op, mine, lambda: give_up(j.store, holder_of(theirs)))
    assert result["expansion_id"] == planned["expansion_id"], result
    assert result["restart"]["mode"] == "cold", result
    record = j.store.get_expansion(planned["expansion_id"])
    assert record.owner == holder_of(mine), record
    assert admin.partition_counts([j.topic]) == {j.topic: 2}  # planned only


@pytest.mark.kafka
def test_a_plan_not_deferrable_waits_for_the_job_in_the_worker(job, admin):
    j = job(2)
    launch._crashed(j)
    context = task_context("plan")
    with pytest.raises(AirflowFailException) as refused:  # no TaskDeferred: it waited here
        launch._plan(j, job_down_timeout_s=0.5, deferrable=False).execute(context)
    message = str(refused.value)
    assert f"JobDownError: job {j.name!r} stayed down" in message, message
    assert "from processor proc-1 (running on job model v1" in message, message
    assert "Nothing was changed" in message and "RestartSettings(task=...)" in message
    launch._nothing_changed(j, admin)

    back: list[launch._Processor] = []
    op = launch._plan(j, job_down_timeout_s=120, deferrable=False, cls=_Watched)
    try:
        planned = _in_worker(op, context, lambda: back.append(
            launch._Processor(j.config, j.name, ["in-app", "standby"])))  # fmt: skip
    finally:
        for processor in back:
            processor.close()
    assert planned["restart"]["mode"] == "in-app", planned  # it launches nothing
    assert j.store.get_expansion(planned["expansion_id"]) is not None


@pytest.mark.kafka
def test_the_factory_passes_the_dags_default_args_choice_to_plan_and_stop(job, admin, run_dag):
    j = job(2)
    launch._crashed(j)
    dag = build_expansion_dag(
        f"inworker_{j.name}", default_args={"deferrable": False},
        job=JobSettings(name=j.name, topics=[j.topic], application_args=launch.USER_ARGS),
        restart=RestartSettings(job_down_timeout_s=1.0), **launch.WAITS,
    )  # fmt: skip
    assert dag.get_task("plan").deferrable is False
    assert dag.get_task("stop_job").deferrable is False
    assert dag.get_task("ack").deferrable is True  # the factory's own choice stays
    run = run_dag(dag)
    states = task_states(run)
    assert str(run.state) == "failed" and states["plan"] == "failed", states
    launch._nothing_changed(j, admin)

    mine = JobSettings(name="j", topics="t", application_args=["--x"])
    on = build_expansion_dag("deferring", default_args={"deferrable": True}, job=mine)
    assert on.get_task("plan").deferrable is True and on.get_task("stop_job").deferrable is True
