"""Green means done: the report step's end (`report.finish`) completes the record, then the
outcome gate fails the run naming each part of the outcome the cluster does not show. Each
case below leaves out one part of an expansion that is otherwise done on the cluster (the
topic grown, v2 the newest model, the live processors on it, the record completed), with and
without an ack step, and checks the run fails at the gate: after the record was completed and
the lease released (so not in `complete`), with the gate's own message."""

from __future__ import annotations

import re

import pytest
from record_states import PlannedJob, put_status

from airflow_samza_expand._protocol import records
from airflow_samza_expand._protocol.outcome import OutcomeMissingError
from airflow_samza_expand._protocol.steps import report
from airflow_samza_expand.core._lease import EXPANSION_LEASE
from airflow_samza_expand.core._record import ExpansionStatus

S = ExpansionStatus
ACK = {"version": 2, "running": ["p-v2"], "others": {}}


def _done_but(job: PlannedJob, ack: bool, *, leave_out: str = "") -> None:
    """The expansion done on the cluster up to the report, but `leave_out`."""
    if leave_out != "grow":
        job.grow()
    if leave_out != "write":
        job.write_v2()
    if leave_out != "run v2":
        job.store.heartbeat("p-v2", 2, "running", role="active")
    if leave_out == "v1 live":
        job.store.heartbeat("p-v1", 1, "running", role="active")
    results = {**job.record().results, **({"ack": ACK} if ack else {})}
    put_status(job, S.SUBMITTED, results=results)


def _finish(job: PlannedJob):
    return report.finish(job.store, job.admin, job.expansion_id, {}, job.holder)


def _fails_at_the_gate(job: PlannedJob, gap: str) -> None:
    """The gate's refusal naming `gap`, raised after `complete` (record completed, lease
    released)."""
    gate = rf"expansion {re.escape(job.expansion_id)} of job '{job.name}' is not done on the "
    with pytest.raises(OutcomeMissingError, match=gate + r"cluster: (.*; )?" + gap):
        _finish(job)
    assert job.record().status == S.COMPLETED  # complete() went through: the gate refused
    lease = job.store.get_lease(EXPANSION_LEASE)
    assert lease is None or not lease.held_by(job.holder)


ACKS = [pytest.param(True, id="with-ack"), pytest.param(False, id="without-ack")]


@pytest.mark.parametrize("ack", ACKS)
def test_an_expansion_done_on_the_cluster_ends_green(planned_job: PlannedJob, ack: bool):
    _done_but(planned_job, ack)
    assert _finish(planned_job).status == S.COMPLETED


@pytest.mark.parametrize("ack", ACKS)
def test_a_topic_below_its_target_fails_the_run(planned_job: PlannedJob, ack: bool):
    _done_but(planned_job, ack, leave_out="grow")
    topic = re.escape(repr(planned_job.topic))
    _fails_at_the_gate(planned_job, rf"topic {topic} has 2 partitions, target 4")


@pytest.mark.parametrize("ack", ACKS)
def test_v2_not_the_newest_job_model_fails_the_run(planned_job: PlannedJob, ack: bool):
    _done_but(planned_job, ack, leave_out="write")
    _fails_at_the_gate(planned_job, r"job model v2 is not the newest \(newest: v1\)")


@pytest.mark.parametrize("ack", ACKS)
def test_a_live_processor_on_another_job_model_fails_the_run(planned_job: PlannedJob, ack: bool):
    _done_but(planned_job, ack, leave_out="v1 live")
    _fails_at_the_gate(planned_job, r"live processors run another job model: p-v1 \(v1\)")


def test_with_an_ack_step_no_processor_ever_on_v2_fails_the_run(planned_job: PlannedJob):
    _done_but(planned_job, True, leave_out="run v2")
    _fails_at_the_gate(planned_job, r"no processor has run job model v2")


def test_without_an_ack_step_nobody_on_v2_yet_is_green(planned_job: PlannedJob):
    """A DAG without an ack step does not wait for vN+1 to run: the gate does not ask."""
    _done_but(planned_job, False, leave_out="run v2")
    assert _finish(planned_job).status == S.COMPLETED


def test_a_processor_that_ran_v2_and_stopped_counts_as_run(planned_job: PlannedJob):
    """An available-now run of vN+1 that ended cleanly acknowledged it."""
    _done_but(planned_job, True, leave_out="run v2")
    planned_job.store.heartbeat("p-v2", 2, "stopped", role="active")
    assert _finish(planned_job).status == S.COMPLETED


@pytest.mark.parametrize("ack", ACKS)
def test_a_record_left_not_completed_fails_the_run(
    planned_job: PlannedJob, ack: bool, monkeypatch: pytest.MonkeyPatch
):
    """`complete` always completes the record or raises; the gate still checks, so a broken
    completion (here: the report's end recorded without its status, a fault the real step
    cannot produce) fails the run instead of ending green."""
    _done_but(planned_job, ack)

    def ends_without_status(store, expansion_id, summary, lease):
        return records.record_step(store, expansion_id, "report", None, summary, lease)

    monkeypatch.setattr(report, "complete", ends_without_status)
    gap = r"the record is 'submitted', not 'completed'"
    with pytest.raises(OutcomeMissingError, match=r"is not done on the cluster: " + gap):
        _finish(planned_job)
