"""The expansion summary of the report step: built from the expansion record and the XComs of
the steps, rendered as log lines. Pure functions (no Airflow, no Kafka)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

# (step name, record field where it ends, record fields where it may start - first present wins)
STEP_MARKS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("expand", "expanded_at", ("planned_at",)),
    ("producer_refresh_grace", "barrier_snapshot_at", ("expanded_at", "grace_started_at")),
    ("barrier_drain", "barrier_passed_at", ("barrier_snapshot_at",)),
    ("stop_job", "job_stopped_at", ("barrier_passed_at",)),
    ("write_job_model", "job_model_written_at", ("job_stopped_at", "barrier_passed_at")),
    ("submit", "submitted_at", ("job_model_written_at",)),
    ("acknowledge", "acknowledged_at", ("submitted_at",)),
)


def _ts(value: Any) -> float | None:
    if not value:
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def seconds_per_step(record: Mapping[str, Any]) -> dict[str, float | None]:
    """Seconds of each step from the record's timestamps (None where a step left none)."""
    out: dict[str, float | None] = {}
    for step, end_field, start_fields in STEP_MARKS:
        end = _ts(record.get(end_field))
        start = next((_ts(record[f]) for f in start_fields if record.get(f)), None)
        out[step] = None if end is None or start is None else round(max(end - start, 0.0), 3)
    return out


def mapping_diff(plan: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each new or moved SSP: ``{ssp: "[kafka, t, 3]", from_task, to_task, keys_from}``."""
    rows = []
    for move in plan.get("moved", []):
        rows.append(
            {
                "ssp": "[{}, {}, {}]".format(*move["ssp"]),
                "from_task": move["from_task"],
                "to_task": move["to_task"],
                "keys_from": "[{}, {}, {}]".format(*move["keys_from"]),
            }
        )
    return rows


def build_summary(
    record: Mapping[str, Any],
    xcoms: Mapping[str, Any],
    *,
    run_mode: str,
    history: Sequence[int],
    dry_run: bool,
) -> dict[str, Any]:
    """The report's summary (JSON-able)."""
    plan_x = xcoms.get("plan") or {}
    plan = plan_x.get("plan") or record.get("plan") or {}
    steps = seconds_per_step(record)
    stopped, acked = _ts(record.get("job_stopped_at")), _ts(record.get("acknowledged_at"))
    downtime = round(acked - stopped, 3) if stopped is not None and acked is not None else None
    barrier = (xcoms.get("barrier") or {}).get("barrier_offsets") or record.get("barrier") or {}
    return {
        "job_name": record.get("job_name") or plan.get("job_name"),
        "expansion_id": plan_x.get("expansion_id") or record.get("expansion_id"),
        "dry_run": dry_run,
        "run_mode": run_mode,
        "resumed": bool(plan_x.get("reused")),
        "job_model_version": {"before": plan.get("old_version"), "after": plan.get("new_version")},
        "job_model_history": list(history),
        "counts_before": plan.get("counts_before", {}),
        "counts_after": plan.get("counts_after", {}),
        "mapping_diff": mapping_diff(plan),
        "barrier_offsets": barrier,
        "lag_drained": (xcoms.get("barrier") or {}).get("lag_drained"),
        "seconds_per_step": steps,
        "downtime_s": downtime,
        "submit": xcoms.get("submit"),
        "acknowledged_by": (xcoms.get("ack") or {}).get("running"),
    }


def render_summary(summary: Mapping[str, Any]) -> str:
    """Log lines of a summary."""
    before, after = summary["counts_before"], summary["counts_after"]
    head = "DRY RUN - nothing changed. " if summary["dry_run"] else ""
    lines = [
        f"{head}Expansion {summary['expansion_id']} of job {summary['job_name']} "
        f"({summary['run_mode']}): job model v{summary['job_model_version']['before']} -> "
        f"v{summary['job_model_version']['after']}; history {summary['job_model_history']}",
        "Partition counts: "
        + ", ".join(f"{t} {before.get(t)} -> {after.get(t)}" for t in sorted(after)),
        "Mapping changes (SSP: old task -> new task, keys from):",
    ]
    for row in summary["mapping_diff"]:
        lines.append(
            f"  {row['ssp']}: {row['from_task'] or '(new)'} -> {row['to_task']} "
            f"(keys from {row['keys_from']})"
        )
    lines.append(f"Barrier offsets: {summary['barrier_offsets']}")
    steps = ", ".join(
        f"{k} {'-' if v is None else f'{v:.1f}s'}" for k, v in summary["seconds_per_step"].items()
    )
    lines.append(f"Seconds per step: {steps}")
    downtime = summary["downtime_s"]
    lines.append(
        "Job downtime (stopped -> restarted job acknowledged): "
        + ("n/a (no running job was stopped)" if downtime is None else f"{downtime:.1f}s")
    )
    return "\n".join(lines)
