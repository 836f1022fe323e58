"""The record's status machine, whole: every transition allowed or refused exactly as the
table says, where a status stands in the run's order, and which step may act on which
status (pure; the protocol steps call these before they act)."""

from __future__ import annotations

import pytest

from airflow_samza_expand.core._clock import now_iso
from airflow_samza_expand.core._record import (
    ORDER,
    TERMINAL,
    TRANSITIONS,
    ExpansionRecord,
    ExpansionStatus,
)
from airflow_samza_expand.core.errors import InvalidTransitionError

S = ExpansionStatus
# the machine as the docs state it (core/_record.py's module docstring)
ALLOWED = {
    S.PLANNED: {S.EXPANDED, S.FAILED},
    S.EXPANDED: {S.BARRIER_SNAPSHOT, S.BARRIER_PASSED, S.FAILED},
    S.BARRIER_SNAPSHOT: {S.BARRIER_PASSED, S.FAILED},
    S.BARRIER_PASSED: {S.JOB_STOPPED, S.FAILED},
    S.JOB_STOPPED: {S.JOB_MODEL_WRITTEN, S.FAILED},
    S.JOB_MODEL_WRITTEN: {S.SUBMITTED, S.COMPLETED, S.FAILED},
    S.SUBMITTED: {S.COMPLETED, S.FAILED},
    S.COMPLETED: set(),
    S.FAILED: set(S) - {S.PLANNED, S.FAILED},
}
PAIRS = [(a, b) for a in S for b in S]


def at(status: ExpansionStatus, **plan) -> ExpansionRecord:
    stamp = now_iso()
    return ExpansionRecord(
        "exp-1", "job", 1, 2, plan or {"counts_before": {"o": 2}, "counts_after": {"o": 4}},
        status, "cli:host/1", stamp, stamp,
    )  # fmt: skip


def test_the_table_is_the_documented_machine():
    assert {s: set(t) for s, t in TRANSITIONS.items()} == ALLOWED
    assert set(TERMINAL) == {S.COMPLETED}
    assert ORDER == (
        S.PLANNED, S.EXPANDED, S.BARRIER_SNAPSHOT, S.BARRIER_PASSED, S.JOB_STOPPED,
        S.JOB_MODEL_WRITTEN, S.SUBMITTED, S.COMPLETED,
    )  # fmt: skip


@pytest.mark.parametrize(("old", "new"), PAIRS, ids=[f"{a.value}->{b.value}" for a, b in PAIRS])
def test_advance_allows_exactly_the_table_and_staying(old, new):
    record = at(old)
    if new == old or new in ALLOWED[old]:
        moved = record.advance(new, owner="other")
        assert moved.status == new and moved.owner == "other"
        assert record.check_successor(new.value) == new
        assert record.status == old  # a new record; this one is unchanged
    else:
        with pytest.raises(InvalidTransitionError) as err:
            record.advance(new)
        text = str(err.value)
        assert f"is {old.value!r}; it cannot become {new.value!r}" in text
        allowed = ", ".join(sorted(ALLOWED[old])) or "none (it is final)"
        assert f"(allowed next: {allowed})" in text


@pytest.mark.parametrize(("old", "new"), PAIRS, ids=[f"{a.value}->{b.value}" for a, b in PAIRS])
def test_reached_and_may_reach(old, new):
    record = at(old)
    on_path = old in ORDER and new in ORDER
    reached = old == new or (on_path and ORDER.index(old) >= ORDER.index(new))
    assert record.reached(new) == reached
    assert record.reached(new.value) == reached
    assert record.may_reach(new) == (reached or new in ALLOWED[old])


def test_a_failed_record_has_reached_nothing_new_and_may_resume_anywhere_but_planned():
    failed = at(S.FAILED)
    assert not any(failed.reached(s) for s in ORDER) and failed.reached(S.FAILED)
    assert [s for s in S if failed.may_reach(s)] == [s for s in S if s != S.PLANNED]


def test_grown_counts_are_the_streams_whose_count_changes():
    record = at(
        S.PLANNED,
        counts_before={"a": 2, "b": 4, "c": 8},
        counts_after={"a": 4, "b": 4, "c": 16, "d": 2},  # d: not in before, not grown
    )
    assert record.grown_counts() == {"a": (2, 4), "c": (8, 16)}
    assert list(record.grown_counts()) == ["a", "c"]  # sorted by stream
    assert at(S.PLANNED, counts_after={"a": 4}).grown_counts() == {}
    assert at(S.PLANNED, counts_before={"a": "2"}, counts_after={"a": "2"}).grown_counts() == {}
    # counts compared by value: a large count read from JSON twice is two int objects
    assert at(S.PLANNED, counts_before={"a": "512"}, counts_after={"a": 512}).grown_counts() == {}
    assert at(S.PLANNED, counts_before={"a": "2"}, counts_after={"a": 4}).grown_counts() == {
        "a": (2, 4)
    }
