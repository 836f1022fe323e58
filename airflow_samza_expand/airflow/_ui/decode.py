"""Expansion records (typed `ExpansionRecord` or a legacy dict document) as `records.Expansion`.

Pure: no store, no Kafka. The legacy branch goes once every writer uses the typed record.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_samza_expand.airflow._ui.records import Expansion, Step
from airflow_samza_expand.core.errors import CorruptCoordinatorRecordError

if TYPE_CHECKING:
    from airflow_samza_expand.core._record import ExpansionRecord

# -- time --------------------------------------------------------------------------------------


def parse_time(value: Any) -> datetime | None:
    """A coordinator timestamp (``...Z`` or with an offset) as aware UTC, or None."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def age_s(value: Any, now: datetime) -> float | None:
    """Seconds from `value` to `now`, never below 0 (a writer's clock a little ahead)."""
    moment = parse_time(value)
    return None if moment is None else max(0.0, round((now - moment).total_seconds(), 1))


# The field of each step's end in a legacy (pre-typed) dict record, by record step name.
LEGACY_END_FIELDS: dict[str, str] = {
    "plan": "planned_at",
    "expand": "expanded_at",
    "barrier_snapshot": "barrier_snapshot_at",
    "barrier": "barrier_passed_at",
    "stop": "job_stopped_at",
    "write": "job_model_written_at",
    "submit": "submitted_at",
    "ack": "acknowledged_at",
    "report": "completed_at",
}
# a legacy record's grace may have started outside the expand step
LEGACY_EXTRA_STARTS = {"barrier_snapshot": ("grace_started_at",)}


def _steps(record: Mapping[str, Any]) -> tuple[Step, ...]:
    """Steps of a legacy record, from its ``<step>_at`` timestamps, in `STEPS` order."""
    from airflow_samza_expand._protocol.steps import STEPS

    out = []
    for step in STEPS:
        end = LEGACY_END_FIELDS.get(step.record_step)
        if end is None:
            continue  # no legacy field (the standby step is newer than dict records)
        starts = [LEGACY_END_FIELDS[s] for s in step.starts_after]
        starts += LEGACY_EXTRA_STARTS.get(step.record_step, ())
        start = next((record[f] for f in starts if record.get(f)), None)
        out.append(_step(step.record_step, start, record.get(end)))
    return tuple(out)


def _step(record_step: str, start: Any, end: Any, seconds: float | None = None) -> Step:
    """A step named by the DAG's task id (`_protocol.steps.step_title`), timed as its record
    (``seconds``; a legacy document's from its start and end fields)."""
    from airflow_samza_expand._protocol.steps import step_title

    if seconds is None:
        t0, t1 = parse_time(start), parse_time(end)
        seconds = round(max((t1 - t0).total_seconds(), 0.0), 3) if t0 and t1 else None
    return Step(step_title(record_step), start, end, seconds, record_step)


def current_log_path(results: Mapping[str, Any]) -> str | None:
    """The log of the current launch: the newest (``started_at``) detached launch recorded by
    the launch steps (submit; under a warm handover the standby step's ``launches``)."""
    handles = launches(results)
    return str(handles[-1]["log_path"]) if handles else None


def launches(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The detached launches the launch steps recorded (with their ``step``), oldest first."""
    from airflow_samza_expand._protocol.restart import LAUNCH_STEPS

    handles = []
    for step in LAUNCH_STEPS:
        result = results.get(step)
        if isinstance(result, Mapping):
            handles += [
                {**h, "step": step} for h in [result, *(result.get("launches") or ())] if _logged(h)
            ]
    # the submit step's launch as it noted it (a try killed before it recorded its handle)
    noted = results.get("launch")
    if _logged(noted) and all(h.get("log_path") != noted["log_path"] for h in handles):
        handles.append({"started_at": noted.get("launched_at"), **noted})
    handles = [{**h, **_facts(h, noted)} for h in handles]
    oldest = datetime.min.replace(tzinfo=UTC)
    return sorted(handles, key=lambda h: parse_time(h.get("started_at")) or oldest)


def _facts(handle: Mapping[str, Any], noted: Any) -> dict[str, Any]:
    """The noted launch's facts (id, host, attempt, ...) for the handle of that launch."""
    if isinstance(noted, Mapping) and noted.get("log_path") == handle.get("log_path"):
        return {k: v for k, v in noted.items() if k not in handle or handle[k] is None}
    return {}


def _logged(handle: Any) -> bool:
    return isinstance(handle, Mapping) and bool(handle.get("log_path"))


def _counts(value: Any) -> dict[str, int]:
    return {str(k): int(v) for k, v in (value or {}).items()}


def expansion_of(expansion_id: str, record: ExpansionRecord | Mapping[str, Any]) -> Expansion:
    """An `Expansion` from a typed `ExpansionRecord` or a legacy dict document."""
    from airflow_samza_expand._protocol.barrier.reads import barrier_from_dict

    if not isinstance(record, Mapping):
        return _typed_expansion(record)
    try:
        return Expansion(
            expansion_id=expansion_id,
            status=str(record.get("status", "unknown")),
            old_version=record.get("old_version"),
            new_version=record.get("new_version"),
            counts_before=_counts(record.get("counts_before")),
            counts_after=_counts(record.get("counts_after")),
            owner=record.get("planned_by"),
            updated_at=record.get("updated_at"),
            steps=_steps(record),
            barrier_snapshot_at=record.get("barrier_snapshot_at"),
            barrier_passed_at=record.get("barrier_passed_at"),
            barrier=barrier_from_dict(record.get("barrier") or {}),
            log_path=current_log_path(record),
            plan=record.get("plan") or {},
            grace_started_at=record.get("expanded_at") or record.get("grace_started_at"),
        )
    except (TypeError, ValueError, AttributeError) as exc:
        raise CorruptCoordinatorRecordError(
            f"expansion record {expansion_id!r} does not decode ({exc}) - fix or delete the record"
        ) from exc


def _when(times: Any) -> tuple[str, str]:
    """Sort key of a step: start (else end), then end; unfinished steps after finished ones."""
    return (times.started_at or times.ended_at or "~", times.ended_at or "~")


def _grace_start(record: ExpansionRecord) -> str | None:
    """As the barrier wait reads it: the expand step's end, else the stored grace start."""
    expand = record.steps.get("expand")
    if expand is not None and expand.ended_at:
        return str(expand.ended_at)
    grace = dict(record.results).get("grace") or {}
    return grace.get("started_at") if isinstance(grace, Mapping) else None


def _typed_expansion(record: ExpansionRecord) -> Expansion:
    plan = dict(record.plan)
    after = _counts(plan.get("counts_after"))
    before = _counts(plan.get("counts_before"))
    barrier_times = record.steps.get("barrier")
    return Expansion(
        expansion_id=record.expansion_id,
        status=str(record.status.value),
        old_version=record.base_version,
        new_version=record.target_version,
        counts_before={s: before.get(s, 0) for s in after},  # a stream that stays included
        counts_after=after,
        owner=record.owner,
        updated_at=record.updated_at,
        steps=tuple(  # each step's one duration: the record's (`StepTimes.seconds`)
            _step(n, t.started_at, t.ended_at, t.seconds)
            for n, t in sorted(record.steps.items(), key=lambda i: _when(i[1]))
        ),
        barrier_snapshot_at=barrier_times.started_at if barrier_times else None,
        barrier_passed_at=barrier_times.ended_at if barrier_times else None,
        barrier={t: dict(ps) for t, ps in (record.barrier or {}).items()},
        log_path=current_log_path(record.results),
        plan=plan,
        grace_started_at=_grace_start(record),
        **_progress(record.results),
        **_order(record),
        restart=_restart(record),
    )


def _restart(record: ExpansionRecord) -> str | None:
    from airflow_samza_expand._protocol.restart import RestartChoice

    choice = RestartChoice.of_record(record)
    return None if choice is None else choice.restart


def _order(record: ExpansionRecord) -> dict[str, Any]:
    """The stale-placement verdict (docs/design.md 'Stale placements') from the record's stale
    placements, as the report words it."""
    from airflow_samza_expand.core._order import OrderEvidence, order_report

    if not record.stale_placements:
        return {}
    try:
        evidence = OrderEvidence.from_dict(record.stale_placements)
        verdict = order_report(evidence.before_snapshot, evidence.after_snapshot)
    except (TypeError, ValueError, KeyError, AttributeError):
        return {}  # an unreadable part: the page shows no verdict rather than a wrong one
    return {"order": verdict["line"], "order_at_risk": verdict["order"] != "proven"}


def _progress(results: Mapping[str, Any]) -> dict[str, Any]:
    """The grace length and end, the barrier lag samples and the launches of an expansion under
    way (`_protocol.barrier.progress`, the launch steps), as `Expansion` fields."""
    grace = results.get("grace")
    grace = grace if isinstance(grace, Mapping) else {}
    samples = results.get("barrier_lag")
    return {
        "grace_s": grace.get("grace_s"),
        "grace_ends_at": grace.get("ends_at"),
        "lag_history": tuple(s for s in samples or () if isinstance(s, Mapping)),
        "launches": tuple(launches(results)),
    }
