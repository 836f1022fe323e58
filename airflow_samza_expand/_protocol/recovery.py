"""After a step failed: gather where the expansion stands (`core._recovery`), log it for the
operator and keep it in the record's ``failures`` result, which the report shows once the run
goes on. No Airflow import."""

from __future__ import annotations

import logging
from typing import Any

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._protocol import records
from airflow_samza_expand.core._clock import now_iso
from airflow_samza_expand.core._liveness import statuses
from airflow_samza_expand.core._record import ExpansionRecord
from airflow_samza_expand.core._recovery import FailureState, describe_failure
from airflow_samza_expand.store import CoordinatorStore

log = logging.getLogger(__name__)

MAX_KEPT = 10  # failures kept in a record (the newest)


def failure_state(
    admin: KafkaAdmin, store: CoordinatorStore, record: ExpansionRecord, step: str, error: str
) -> FailureState:
    """The facts of `core._recovery.FailureState`, read now."""
    before = {s: int(n) for s, n in record.plan.get("counts_before", {}).items()}
    after = {s: int(n) for s, n in record.plan.get("counts_after", {}).items()}
    latest = store.latest_job_model()
    return FailureState(
        expansion_id=record.expansion_id,
        step=step,
        error=error,
        counts_before=before,
        counts_after=after,
        live_counts=admin.partition_counts(sorted(before)),
        base_version=record.base_version,
        target_version=record.target_version,
        latest_version=latest.version if latest is not None else None,
        processors=tuple(statuses(store.processors()).values()),
    )


def report_failure(
    admin: KafkaAdmin, store: CoordinatorStore, expansion_id: str, step: str, error: str
) -> list[str]:
    """Log where the expansion stands after `step` failed and what to do; keep the lines in
    the record's ``failures`` result. Returns the lines ([] without a record: nothing began)."""
    record = store.get_expansion(expansion_id)
    if record is None:
        return []
    lines = describe_failure(failure_state(admin, store, record, step, error))
    for line in lines:
        log.error("%s", line)
    entry = {"step": step, "at": now_iso(), "lines": lines}

    def change(current: ExpansionRecord) -> ExpansionRecord:
        kept = list(current.results.get("failures") or [])[-(MAX_KEPT - 1) :]
        return current.with_result("failures", [*kept, entry])

    records.update(store, expansion_id, change)
    return lines


def earlier_failures(record: ExpansionRecord | None) -> list[dict[str, Any]]:
    """The failures kept in the record (oldest first)."""
    if record is None:
        return []
    return [dict(f) for f in record.results.get("failures") or [] if isinstance(f, dict)]


__all__ = ["earlier_failures", "failure_state", "report_failure"]
