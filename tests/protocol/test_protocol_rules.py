"""The protocol's pure rules, each branch and bound: which step may act on which record status
(`records.check_reachable`, `check_after`, `mark`), the outcome gate's gaps
(`outcome.gaps`) and the barrier's pass rule (`reads.compute_status`). No Kafka, no store."""

from __future__ import annotations

from datetime import timedelta

import pytest

from airflow_samza_expand._protocol import records
from airflow_samza_expand._protocol.barrier.reads import compute_status
from airflow_samza_expand._protocol.outcome import gaps
from airflow_samza_expand.core._clock import now_iso, to_iso, utc_now
from airflow_samza_expand.core._record import ORDER, ExpansionRecord, ExpansionStatus, StepTimes
from airflow_samza_expand.core.errors import InvalidTransitionError

S = ExpansionStatus
PLAN = {"counts_before": {"o": 2, "p": 2}, "counts_after": {"o": 4, "p": 2}}


def at(status: ExpansionStatus, **changes) -> ExpansionRecord:
    stamp = now_iso()
    fields = {"plan": PLAN, **changes}
    return ExpansionRecord("job~o.2-4", "job", 1, 2, status=status, owner="t", created_at=stamp,
                           updated_at=stamp, **fields)  # fmt: skip


# -- which step may act on which status ---------------------------------------------------------


@pytest.mark.parametrize("status", list(S))
def test_check_reachable_refuses_exactly_the_statuses_before_the_one_the_step_follows(status):
    record = at(status)
    for target in (S.JOB_STOPPED, S.SUBMITTED, S.COMPLETED):
        if record.may_reach(target):
            records.check_reachable(record, target, "x")
            continue
        with pytest.raises(InvalidTransitionError) as err:
            records.check_reachable(record, target, "x")
        assert str(err.value).startswith(
            f"step 'x' of expansion 'job~o.2-4' asks for status {target.value!r}, but the "
            f"record is {status.value!r}, which cannot become {target.value!r}"
        )


@pytest.mark.parametrize("status", list(S))
def test_check_after_needs_the_status_reached_or_a_failed_record(status):
    record = at(status, steps={"plan": StepTimes(now_iso(), now_iso()), "expand": StepTimes()})
    ready = status == S.FAILED or ORDER.index(status) >= ORDER.index(S.JOB_MODEL_WRITTEN)
    if ready:
        records.check_after(record, S.JOB_MODEL_WRITTEN, "ack")
        return
    with pytest.raises(InvalidTransitionError) as err:
        records.check_after(record, S.JOB_MODEL_WRITTEN, "ack")
    assert f"the record is {status.value!r}, not yet 'job-model-written'" in str(err.value)
    assert "(steps ended: plan)" in str(err.value)  # a step only begun has not ended


def test_mark_moves_forward_keeps_a_record_past_and_refuses_a_skipped_step():
    done = records.mark(at(S.PLANNED), "expand", S.EXPANDED, result={"o": 4})
    assert done.status == S.EXPANDED and done.results["expand"] == {"o": 4}
    assert done.steps["expand"].ended_at is not None
    assert records.mark(at(S.SUBMITTED), "expand", S.EXPANDED).status == S.SUBMITTED
    assert records.mark(at(S.EXPANDED), "expand", S.EXPANDED).status == S.EXPANDED
    assert records.mark(at(S.PLANNED), "ack", None).status == S.PLANNED
    assert "ack" not in records.mark(at(S.PLANNED), "ack", None).results
    began = at(S.PLANNED, steps={"expand": StepTimes("2026-01-01T00:00:00.000Z", None)})
    kept = records.mark(began, "expand", S.EXPANDED, started_at="2026-02-01T00:00:00.000Z")
    assert kept.steps["expand"].started_at == "2026-01-01T00:00:00.000Z"
    fresh = records.mark(at(S.PLANNED), "expand", None, started_at="2026-02-01T00:00:00.000Z")
    assert fresh.steps["expand"].started_at == "2026-02-01T00:00:00.000Z"
    with pytest.raises(InvalidTransitionError, match="'planned', which cannot become 'completed'"):
        records.mark(at(S.PLANNED), "report", S.COMPLETED)


def test_reached_is_the_records_own():
    assert records.reached(at(S.SUBMITTED), S.JOB_STOPPED)
    assert not records.reached(at(S.EXPANDED), S.JOB_STOPPED)


# -- the outcome gate's gaps ------------------------------------------------------------------


def beat(version: int, state: str = "running", role: str | None = "active", age_s: float = 0.0,
         ttl: float = 30.0) -> dict:  # fmt: skip
    at_ = to_iso(utc_now() - timedelta(seconds=age_s))
    return {"job_model_version": version, "state": state, "heartbeat_at": at_, "role": role,
            "ttl": ttl}  # fmt: skip


DONE = at(S.COMPLETED, results={"ack": {"version": 2}})


def test_an_outcome_on_the_cluster_has_no_gap():
    assert gaps(DONE, {"o": 4}, 2, {"a": beat(2)}) == []
    assert gaps(DONE, {"o": 8}, 2, {"a": beat(2)}) == []  # grown further: not behind


def test_a_grown_stream_below_its_target_is_a_gap_and_a_stream_that_stays_is_not_looked_at():
    assert gaps(DONE, {"o": 3}, 2, {"a": beat(2)}) == ["topic 'o' has 3 partitions, target 4"]
    assert gaps(at(S.COMPLETED, plan={"counts_after": {"o": 4}}), {}, 2, {}) == []


@pytest.mark.parametrize(
    ("newest", "says"), [(None, "newest: none"), (1, "newest: v1"), (3, "newest: v3")]
)
def test_vn1_not_the_newest_job_model_is_a_gap(newest, says):
    assert gaps(DONE, {"o": 4}, newest, {"a": beat(2)}) == [
        f"job model v2 is not the newest ({says})"
    ]


def test_a_live_active_processor_on_another_model_is_a_gap_others_are_not():
    others = {
        "a": beat(2),
        "b": beat(1),  # live, running, active: a gap
        "c": beat(1, role=None),  # a record from before roles: active
        "d": beat(1, role="standby"),
        "e": beat(1, state="starting"),
        "f": beat(1, age_s=31.0),  # dead
        "g": beat(3, age_s=29.0, ttl=30.0),  # just alive
        "h": beat(1, state="failed"),  # ended: not running
        "i": beat(1, state="stopped"),
    }
    assert gaps(DONE, {"o": 4}, 2, others) == [
        "live processors run another job model: b (v1), c (v1), g (v3)"
    ]


def test_with_an_ack_step_nobody_on_vn1_is_a_gap_a_clean_stop_on_it_counts():
    assert gaps(DONE, {"o": 4}, 2, {}) == ["no processor has run job model v2"]
    for ran in (beat(2, state="stopped"), beat(2, role=None)):
        assert gaps(DONE, {"o": 4}, 2, {"a": ran}) == []
    for not_ran in (beat(2, state="failed"), beat(2, role="standby"), beat(2, age_s=40.0),
                    beat(1, state="stopped"), beat(3, state="stopped"),
                    beat(2, state="stopping", age_s=40.0)):  # fmt: skip
        assert gaps(DONE, {"o": 4}, 2, {"a": not_ran}) == ["no processor has run job model v2"]
    without_ack = at(S.COMPLETED)
    assert gaps(without_ack, {"o": 4}, 2, {}) == []


@pytest.mark.parametrize("status", [s for s in S if s != S.COMPLETED])
def test_a_record_not_completed_is_a_gap(status):
    record = at(status)
    assert gaps(record, {"o": 4}, 2, {}) == [f"the record is {status.value!r}, not 'completed'"]


def test_every_gap_is_named_at_once_in_order():
    found = gaps(at(S.SUBMITTED, results={"ack": {}}), {"o": 2}, 1, {"b": beat(1)})
    assert [g.split(" ")[0] for g in found] == ["topic", "job", "live", "no", "the"]


# -- the barrier's pass rule ------------------------------------------------------------------


def test_the_barrier_holds_once_every_old_partition_is_committed_to_its_offset():
    barrier = {"o": {0: 10, 1: 5}, "p": {0: 0}}
    held = compute_status("g", barrier, {"o": {0: 10, 1: 7}})
    assert held.holds and held.total_lag == 0
    assert held.lag == {"o": {0: 0, 1: 0}, "p": {0: 0}}
    assert held.committed == {"o": {0: 10, 1: 7}, "p": {0: None}}
    short = compute_status("g", barrier, {"o": {0: 9, 1: 5}})
    assert not short.holds and short.total_lag == 1 and short.lag["o"] == {0: 1, 1: 0}
    nothing = compute_status("g", barrier, {})
    assert not nothing.holds and nothing.total_lag == 15 and nothing.lagging() == [
        ("o", 0, 10), ("o", 1, 5)
    ]  # fmt: skip
    assert compute_status("g", {}, {}).holds
    assert compute_status("g", barrier, {"o": {0: 10, 1: 5}}).barrier == barrier
