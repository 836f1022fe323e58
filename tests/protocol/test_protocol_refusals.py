"""Every step that changes something checks the record's status before it acts: on a record an
earlier step left behind it raises InvalidTransitionError naming both statuses, and nothing has
changed - not the record (not even a step's start time), not the stop request, not the topic,
not the job models. Each case sets up what the step would change if it acted (a running
processor for the stop, a stop request the submit would clear, the topic at its old count for
the expand)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from record_states import ORDER, PlannedJob, cluster_state, put_status

from airflow_samza_expand._protocol.steps import ack, report, stop, submit
from airflow_samza_expand._protocol.steps.expand import ExpandRequest, expand
from airflow_samza_expand._protocol.steps.write_model import write_job_model
from airflow_samza_expand.core._record import ExpansionStatus
from airflow_samza_expand.core.errors import InvalidTransitionError

S = ExpansionStatus


def _before(status: ExpansionStatus) -> list[ExpansionStatus]:
    return list(ORDER[: ORDER.index(status)])


def _stop(job: PlannedJob) -> Any:
    return stop.request_stop(job.store, "test", expansion_id=job.expansion_id)


def _stop_begin(job: PlannedJob) -> Any:
    return stop.begin(job.store, job.expansion_id)


def _write(job: PlannedJob) -> Any:
    return write_job_model(job.admin, job.store, "test-writer", expansion_id=job.expansion_id)


def _submit(job: PlannedJob) -> Any:
    return submit.before_submit(job.store, job.expansion_id, continuous=True)


def _ack_poll(job: PlannedJob) -> Any:
    return ack.ack_poll(job.store, 2, expansion_id=job.expansion_id)


def _ack_record(job: PlannedJob) -> Any:
    return ack.record_ack(job.store, job.expansion_id, {"version": 2, "running": ["p"]}, None)


def _report(job: PlannedJob) -> Any:
    return report.start(job.store, job.record())


def _expand(job: PlannedJob) -> Any:
    return expand(job.admin, job.store, ExpandRequest(job.topic, factor=2),
                  expansion_id=job.expansion_id)  # fmt: skip


def _running_v1(job: PlannedJob) -> None:
    job.store.heartbeat("p-v1", 1, "running", role="active")


def _stop_left_for_newest(job: PlannedJob) -> None:
    """A stop request for the version the submit would launch: the launch clears it."""
    job.store.request_stop(job.store.latest_job_model().version, "left by an earlier stop")


def _nothing(job: PlannedJob) -> None:
    return None


# step, its call, what it would change, the wrong states, what the refusal says
Case = tuple[str, Callable[[PlannedJob], Any], Callable[[PlannedJob], None], list[S], str]
CASES: list[Case] = [
    ("stop", _stop, _running_v1, _before(S.BARRIER_PASSED), "asks for status 'job-stopped'"),
    ("stop", _stop_begin, _running_v1, _before(S.BARRIER_PASSED), "'job-stopped'"),
    ("write", _write, PlannedJob.grow, _before(S.JOB_STOPPED), "'job-model-written'"),
    ("submit", _submit, _stop_left_for_newest, _before(S.JOB_MODEL_WRITTEN), "'submitted'"),
    ("ack", _ack_poll, _nothing, _before(S.JOB_MODEL_WRITTEN), "not yet 'job-model-written'"),
    ("ack", _ack_record, _nothing, _before(S.JOB_MODEL_WRITTEN), "not yet 'job-model-written'"),
    ("report", _report, _nothing, _before(S.JOB_MODEL_WRITTEN), "asks for status 'completed'"),
    # the expand grows only before the barrier: past it the growth would put keys beyond it
    ("expand", _expand, _nothing, list(ORDER[ORDER.index(S.BARRIER_SNAPSHOT) :]),
     "its barrier was taken"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("step", "call", "setup", "status", "says"),
    [
        pytest.param(step, call, setup, status, says, id=f"{call.__name__[1:]}-{status.value}")
        for step, call, setup, states, says in CASES
        for status in states
    ],
)
def test_a_step_on_a_record_not_ready_for_it_refuses_with_nothing_changed(
    planned_job: PlannedJob, step, call, setup, status, says
):
    put_status(planned_job, status)
    setup(planned_job)
    before = cluster_state(planned_job)
    with pytest.raises(InvalidTransitionError, match=re.escape(says)) as err:
        call(planned_job)
    assert f"'{status.value}'" in str(err.value), err.value
    if step != "expand":
        assert f"step {step!r}" in str(err.value), err.value
    assert cluster_state(planned_job) == before


def test_each_step_acts_on_the_record_it_is_ready_for(planned_job: PlannedJob):
    """The cases above change something when the record is ready: the refusal is what kept
    them from it (the same calls, one status each, in the chain's order)."""
    job = planned_job
    _running_v1(job)
    put_status(job, S.BARRIER_PASSED)
    assert _stop(job).requested and job.store.stop_request()["version"] == 1
    put_status(job, S.JOB_STOPPED)
    job.grow()
    assert _write(job)["version"] == 2
    put_status(job, S.JOB_MODEL_WRITTEN)
    _stop_left_for_newest(job)
    assert _submit(job).launch and job.store.stop_request() is None
    _ack_poll(job)
    _ack_record(job)
    assert "ack" in job.record().steps and "submit" in job.record().steps
    assert "report" in _report(job).steps


def test_a_failed_record_is_resumed_by_every_step(planned_job: PlannedJob):
    """``failed`` may become any status but ``planned``: a cleared step resumes it."""
    job = planned_job
    put_status(job, S.FAILED)
    _running_v1(job)
    assert _stop(job).requested
    _ack_poll(job)
    assert "report" in _report(job).steps


@pytest.mark.parametrize("status", list(S), ids=[s.value for s in S])
def test_plan_never_moves_an_existing_records_status(planned_job: PlannedJob, status):
    """The plan's one status write is a new record at ``planned`` (revision 0: one that exists
    is reused, never overwritten). A later plan of the same intent by another run, in any
    status the record is in, leaves that status as it is (a failed record stays failed until
    a step resumes it)."""
    from airflow_samza_expand._protocol.ownership import give_up
    from airflow_samza_expand._protocol.steps.plan.step import PlanRequest, plan

    job = planned_job
    put_status(job, status)
    give_up(job.store, job.holder)
    request = PlanRequest(job_name=job.name, topics=(job.topic,), check_partitioner=False)
    plan(job.store, job.admin, request, f"{job.holder}-next")
    assert job.record().status == status
