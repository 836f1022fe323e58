"""The expansion summary of the report step: built from the expansion record (its step times)
and the steps' results, rendered as log lines. Pure functions (no Airflow, no Kafka)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_samza_expand.core.clock import parse_iso
from airflow_samza_expand.core.order import OrderEvidence, order_report
from airflow_samza_expand.core.record import ExpansionRecord
from airflow_samza_expand.protocol.recovery import earlier_failures

# (step name, record step where it ends, record steps where it may start - first present wins)
STEP_MARKS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("expand", "expand", ("plan",)),
    ("producer_refresh_grace", "barrier_snapshot", ("expand",)),
    ("barrier_drain", "barrier", ("barrier_snapshot",)),
    ("stop_job", "stop", ("barrier",)),
    ("write_job_model", "write", ("stop", "barrier")),
    ("submit", "submit", ("write",)),
    ("acknowledge", "ack", ("submit",)),
)


def _ts(value: Any) -> float | None:
    return parse_iso(str(value)).timestamp() if value else None


def _ended(record: ExpansionRecord | None, step: str) -> float | None:
    times = record.steps.get(step) if record is not None else None
    return _ts(times.ended_at) if times is not None else None


def seconds_per_step(record: ExpansionRecord | None) -> dict[str, float | None]:
    """Seconds of each step from the record's step times (None where a step left none; a
    stop that found nothing running is None too)."""
    out: dict[str, float | None] = {}
    for step, end_step, start_steps in STEP_MARKS:
        end = _ended(record, end_step)
        start = next((t for t in (_ended(record, s) for s in start_steps) if t is not None), None)
        stop = (record.results.get("stop") or {}) if record is not None else {}
        if step == "stop_job" and not stop.get("requested"):
            end = None
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
    record: ExpansionRecord | None,
    xcoms: Mapping[str, Any],
    *,
    run_mode: str,
    history: Sequence[int],
    dry_run: bool,
) -> dict[str, Any]:
    """The report's summary (JSON-able)."""
    plan_x = xcoms.get("plan") or {}
    plan = plan_x.get("plan") or (dict(record.plan) if record is not None else {})
    steps = seconds_per_step(record)
    stopped, acked = _ended(record, "stop"), _ended(record, "ack")
    if steps["stop_job"] is None:
        stopped = None
    downtime = round(acked - stopped, 3) if stopped is not None and acked is not None else None
    recorded = (
        {t: {str(p): o for p, o in ps.items()} for t, ps in (record.barrier or {}).items()}
        if record is not None and record.barrier
        else {}
    )
    barrier = (xcoms.get("barrier") or {}).get("barrier_offsets") or recorded
    return {
        "job_name": plan.get("job_name") or (record.job_name if record is not None else None),
        "expansion_id": plan_x.get("expansion_id") or (record.expansion_id if record else None),
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
        "policy": plan_x.get("policy")
        or ((record.results.get("plan") or {}).get("policy") if record is not None else None),
        "readers": plan_x.get("readers")
        or ((record.results.get("plan") or {}).get("readers") if record is not None else None),
        "order": _order(record),
        # steps that failed for good before the run went on (cleared), with the state then
        "failures": earlier_failures(record),
    }


def _order(record: ExpansionRecord | None) -> dict[str, Any] | None:
    """Rule 1.5's verdict from the record's stale placements (as of the report)."""
    if record is None:
        return None
    evidence = OrderEvidence.from_dict(record.stale_placements)
    return order_report(evidence.before_snapshot, evidence.after_snapshot)


def render_summary(summary: Mapping[str, Any]) -> str:
    """Log lines of a summary."""
    before, after = summary["counts_before"], summary["counts_after"]
    head = "DRY RUN - nothing changed. " if summary["dry_run"] else ""
    lines = [
        f"{head}Expansion {summary['expansion_id']} of job {summary['job_name']} "
        f"({summary['run_mode']}): job model v{summary['job_model_version']['before']} -> "
        f"v{summary['job_model_version']['after']}; history {summary['job_model_history']}",
        "Partition counts: "
        + ", ".join(
            f"{t} {before.get(t)} -> {after.get(t)}"
            for t in sorted(after)
            if before.get(t) != after.get(t)
        )
        + "".join(
            f"; {t} stays at {n} (read on as before)"
            for t, n in sorted(after.items())
            if before.get(t) == n
        ),
        "Mapping changes (SSP: old task -> new task, keys from):",
    ]
    for row in summary["mapping_diff"]:
        lines.append(
            f"  {row['ssp']}: {row['from_task'] or '(new)'} -> {row['to_task']} "
            f"(keys from {row['keys_from']})"
        )
    for decision in summary.get("policy") or []:
        lines.append("Growth policy: " + "; ".join(decision["reasons"]))
    for warning in (summary.get("readers") or {}).get("warnings") or []:
        lines.append("WARNING: " + warning)
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
    for failure in summary.get("failures") or []:
        lines.append(f"Earlier failure of step {failure['step']} at {failure['at']}, cleared:")
        lines += [f"  {line}" for line in failure["lines"][1:]]
    if summary.get("order"):
        lines.append(summary["order"]["line"])
    return "\n".join(lines)
