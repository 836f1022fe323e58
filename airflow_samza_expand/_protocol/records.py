"""Reading and updating expansion records: every update is conditional on the revision read
(`CoordinatorStore.put_expansion(..., expected_revision=...)`); on `StaleRevisionError` the
change is re-applied to the record as it now is (re-read and decide again), so no field that
another writer set is lost."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from airflow_samza_expand.core._clock import now_iso
from airflow_samza_expand.core._lease import Lease
from airflow_samza_expand.core._record import ORDER, ExpansionRecord, ExpansionStatus
from airflow_samza_expand.core.errors import (
    ExpansionError,
    InvalidTransitionError,
    StaleRevisionError,
)
from airflow_samza_expand.store import CoordinatorStore

S = ExpansionStatus
MAX_ATTEMPTS = 20

Change = Callable[[ExpansionRecord], ExpansionRecord | None]


class MissingExpansionError(ExpansionError):
    """The expansion id names no record in the job's coordinator store."""


def expansion_id_for(
    job_name: str, counts_before: Mapping[str, int], counts_after: Mapping[str, int]
) -> str:
    """Deterministic id from the job and each grown stream's counts
    (``orders-job~orders.4-8~payments.2-4``): a rerun of the same plan finds the same record."""
    parts = [_safe(job_name)]
    for stream in sorted(counts_after):
        parts.append(f"{_safe(stream)}.{counts_before[stream]}-{counts_after[stream]}")
    return "~".join(parts)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def require(store: CoordinatorStore, expansion_id: str) -> ExpansionRecord:
    """The record, or MissingExpansionError saying how to create it."""
    record = store.get_expansion(expansion_id)
    if record is None:
        raise MissingExpansionError(
            f"no expansion record {expansion_id!r} for job {store.job_name!r} in its coordinator "
            "store - run PlanExpansionOperator first and pass its expansion_id "
            "(e.g. \"{{ ti.xcom_pull(task_ids='plan')['expansion_id'] }}\")"
        )
    return record


def update(
    store: CoordinatorStore, expansion_id: str, change: Change, *, fence: Lease | None = None
) -> ExpansionRecord:
    """Apply `change` to the current record and store it conditionally; on a stale revision
    re-read and apply again. `change` returns None (or the record unchanged) for "nothing to
    do". Returns the record as stored."""
    for _ in range(MAX_ATTEMPTS):
        current = require(store, expansion_id)
        changed = change(current)
        if changed is None or changed == current:
            return current
        try:
            return store.put_expansion(changed, expected_revision=current.revision, fence=fence)
        except StaleRevisionError:
            continue  # someone else wrote first: decide again on what is there now
    raise StaleRevisionError(
        f"expansion {expansion_id!r} changed {MAX_ATTEMPTS} times while this step tried to update "
        "it - retry the task"
    )


def reached(record: ExpansionRecord, status: ExpansionStatus) -> bool:
    """True when `record` is at `status` or past it (a failed record has reached nothing new)."""
    return record.reached(status)


def begin(
    store: CoordinatorStore,
    expansion_id: str,
    step: str,
    *,
    fence: Lease | None = None,
    record: ExpansionRecord | None = None,
) -> ExpansionRecord:
    """Note that `step`'s action begins now (its first call): the step's start. A step that
    already has times keeps them, so a rerun or the next poll writes nothing; `record`, the
    record as just read, spares the read then. Returns the record as stored."""
    if record is not None and step in record.steps:
        return record

    def start(current: ExpansionRecord) -> ExpansionRecord | None:
        if step in current.steps:
            return None
        return current.with_step(step, started_at=now_iso())

    return update(store, expansion_id, start, fence=fence)


def mark(
    record: ExpansionRecord,
    step: str,
    status: ExpansionStatus | None = None,
    *,
    result: object = None,
    started_at: str | None = None,
) -> ExpansionRecord:
    """`record` with `step` ended now (its result stored) and advanced to `status`. A record
    already at `status` or past it stays (a rerun never moves a record back); a `status` that
    cannot follow the record's raises InvalidTransitionError naming both - a step never keeps
    the old status quietly. A start already recorded (`begin`) is kept."""
    old = record.steps.get(step)
    start = old.started_at if old is not None and old.started_at else started_at
    out = record.with_step(step, started_at=start, ended_at=now_iso())
    if result is not None:
        out = out.with_result(step, result)
    if status is not None and not reached(out, status):
        check_reachable(out, status, step)
        out = out.advance(status)
    return out


def check_reachable(record: ExpansionRecord, status: ExpansionStatus, step: str) -> None:
    """InvalidTransitionError naming both statuses when `step` cannot move `record` to
    `status` (nor finds it there or past it): an earlier step did not end. A step that changes
    something for good calls it before it acts, so a refusal changes nothing."""
    if not record.may_reach(status):
        raise _not_ready(record, status, step, "which cannot become")


def check_after(record: ExpansionRecord, status: ExpansionStatus, step: str) -> None:
    """InvalidTransitionError when `step`, which needs the record at `status` or past it (or
    failed: a rerun resumes), finds it before: an earlier step did not end."""
    if not (record.reached(status) or record.status == S.FAILED):
        raise _not_ready(record, status, step, "not yet")


def _not_ready(
    record: ExpansionRecord, status: ExpansionStatus, step: str, how: str
) -> InvalidTransitionError:
    ended = ", ".join(s for s, t in record.steps.items() if t.ended_at) or "none"
    return InvalidTransitionError(
        f"step {step!r} of expansion {record.expansion_id!r} asks for status "
        f"{status.value!r}, but the record is {record.status.value!r}, {how} "
        f"{status.value!r} - an earlier step did not end (steps ended: {ended}); run the "
        "steps before it first (the DAG's order: plan, expand, barrier, stop_job, "
        "write_job_model, submit, ack, report)"
    )


def record_step(
    store: CoordinatorStore,
    expansion_id: str | None,
    step: str,
    status: ExpansionStatus | None,
    result: object,
    lease: Lease | None,
) -> ExpansionRecord | None:
    """Note a step's end and result (submit: the redacted handle; ack: who runs vN+1); nothing
    without an expansion id."""
    if not expansion_id:
        return None
    return update(store, expansion_id, lambda r: mark(r, step, status, result=result), fence=lease)


__all__ = [
    "ORDER",
    "MissingExpansionError",
    "begin",
    "check_after",
    "check_reachable",
    "expansion_id_for",
    "mark",
    "reached",
    "record_step",
    "require",
    "update",
]
