"""``StopStatefulJobOperator(deferrable=True)``: the waits of the stop step (a warm standby of
vN+1, then the processors of vN stopping) run in the triggerer (`JobStopTrigger`) instead of
holding a worker slot, with the outcome of the waits in the worker: the stop request written
only after the standby is warm, the step recorded in the expansion record, a stop that takes
too long a retryable error. The default follows Airflow's ``[operators] default_deferrable``."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest
from airflow.sdk.exceptions import TaskDeferred
from airflow_env import first_event, task_context

from airflow_samza_expand._protocol import records
from airflow_samza_expand.airflow.operators import StopStatefulJobOperator
from airflow_samza_expand.airflow.operators._stop import StopTimeoutError
from airflow_samza_expand.airflow.triggers import JobStopTrigger
from airflow_samza_expand.core._clock import now_iso
from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus

pytestmark = pytest.mark.kafka


def _resume(op: StopStatefulJobOperator, deferred: TaskDeferred) -> dict:
    """What the worker does once the trigger fired: the named method with the event."""
    event = asyncio.run(first_event(deferred.trigger, 30))
    method = getattr(op, deferred.method_name)
    return method(task_context("stop_job"), event.payload, **(deferred.kwargs or {}))


def _round_trips(trigger: JobStopTrigger) -> None:
    from airflow.sdk._shared.module_loading import import_string

    classpath, kwargs = trigger.serialize()
    assert import_string(classpath)(**kwargs).serialize() == (classpath, kwargs)


def test_deferred_stop_waits_for_the_standby_then_the_stop_in_the_triggerer(job):
    j = job(2)
    eid = f"{j.name}~{j.topic}.2-4"
    stamp = now_iso()
    record = ExpansionRecord(
        expansion_id=eid, job_name=j.name, base_version=1, target_version=2,
        plan={"counts_before": {j.topic: 2}, "counts_after": {j.topic: 4}},
        status=ExpansionStatus.BARRIER_PASSED, owner="test", created_at=stamp, updated_at=stamp,
    )  # fmt: skip
    j.store.put_expansion(record, expected_revision=0)
    j.store.heartbeat("p-1", 1, "running")
    op = StopStatefulJobOperator(
        task_id="stop_job", job_name=j.name, expansion_id=eid, deferrable=True,
        poll_interval_s=0.2, stop_timeout_s=30, standby_warm_timeout_s=30,
    )  # fmt: skip

    with pytest.raises(TaskDeferred) as standby:
        op.execute(task_context("stop_job"))
    trigger = standby.value.trigger
    assert isinstance(trigger, JobStopTrigger)
    assert (trigger.wait, trigger.version) == ("standby", 2)
    assert trigger.holder  # the run's lease is renewed while it waits
    _round_trips(trigger)
    assert j.store.stop_request() is None  # v1 keeps running until its standby is warm

    j.store.heartbeat("v2-standby", 2, "standby", role="standby", ttl_s=30)
    with pytest.raises(TaskDeferred) as stopping:
        _resume(op, standby.value)
    trigger = stopping.value.trigger
    assert (trigger.wait, trigger.version) == ("stop", 1)
    _round_trips(trigger)
    assert j.store.stop_request()["version"] == 1

    j.store.heartbeat("p-1", 1, "stopped")  # the job reacts to the stop request
    result = _resume(op, stopping.value)
    assert result["requested"] is True and result["stopped"] == ["p-1"]
    assert result["version"] == 1 and result["standby_waited_s"] is not None
    assert records.require(j.store, eid).status == ExpansionStatus.JOB_STOPPED


def test_deferred_stop_times_out_retryably(job):
    j = job(2)
    j.store.heartbeat("stuck", 1, "running")
    op = StopStatefulJobOperator(
        task_id="stop_job", job_name=j.name, deferrable=True, poll_interval_s=0.2,
        stop_timeout_s=0.5,
    )  # fmt: skip
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(task_context("stop_job"))
    with pytest.raises(StopTimeoutError, match="stuck"):
        _resume(op, deferred.value)


@pytest.mark.parametrize("setting", ["True", "False"])
def test_deferrable_defaults_to_operators_default_deferrable(airflow_home, setting):
    """Of the stop and the plan operators (the operators that wait)."""
    probe = (
        "from airflow_samza_expand.airflow.operators import StopStatefulJobOperator as S, "
        "PlanExpansionOperator as P; "
        "print(S(task_id='stop', job_name='j').deferrable, "
        "S(task_id='stop', job_name='j', deferrable=False).deferrable, "
        "P(task_id='plan', job_name='j', topics=['t']).deferrable, "
        "P(task_id='plan', job_name='j', topics=['t'], deferrable=False).deferrable)"
    )
    env = {**os.environ, "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": setting}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env=env, timeout=120, check=True).stdout.split()  # fmt: skip
    assert out == [setting, "False", setting, "False"]
