"""The report step: the expansion summary built from the record (its step times, iterated in
`STEPS` order) and the steps' typed results, rendered as log lines (pure: no Airflow, no
Kafka), `start` (refused before anything is written when the record cannot complete) and
`finish`, the step's end: `complete` (the record's ``completed``), then the outcome gate.
Its own scan for stale placements beyond the barrier is
`_protocol.barrier.evidence.scan_after_snapshot`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._protocol import outcome, records
from airflow_samza_expand._protocol.ownership import give_up, take
from airflow_samza_expand._protocol.recovery import earlier_failures
from airflow_samza_expand._protocol.steps import STEPS
from airflow_samza_expand._protocol.steps.results import PlanResult, StopResult
from airflow_samza_expand.core._clock import parse_iso
from airflow_samza_expand.core._lease import Lease
from airflow_samza_expand.core._order import OrderEvidence, order_report
from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus
from airflow_samza_expand.store import CoordinatorStore


def _ts(value: Any) -> float | None:
    return parse_iso(str(value)).timestamp() if value else None


def _ended(record: ExpansionRecord | None, step: str) -> float | None:
    times = record.steps.get(step) if record is not None else None
    return _ts(times.ended_at) if times is not None else None


def seconds_per_step(record: ExpansionRecord | None) -> dict[str, float | None]:
    """Seconds of each step of the chain that ran, named by the factory DAG's task id
    (`Step.title`: ``barrier (drain)`` ...), as the record keeps them (`StepTimes.seconds`,
    start to end: what the job page shows). None for a step without both times; a stop that
    found nothing running is None too."""
    stop = StopResult.of(record)
    out: dict[str, float | None] = {}
    for step in STEPS:
        times = record.steps.get(step.record_step) if record is not None else None
        if step.record_step == "report" or (times is None and step.record_step == "standby"):
            continue  # the report is this step; a chain without a standby step has none
        seconds = times.seconds if times is not None else None
        if step.record_step == "stop" and not (stop is not None and stop.requested):
            seconds = None
        out[step.title] = seconds
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
    planned = PlanResult.of(record)
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
        "restart": planned.restart if record is not None else None,
        "submit": xcoms.get("submit"),
        "acknowledged_by": (xcoms.get("ack") or {}).get("running"),
        "policy": plan_x.get("policy") or (planned.policy if record is not None else None),
        "readers": plan_x.get("readers") or (planned.readers if record is not None else None),
        "order": _order(record),
        # steps that failed for good before the run went on (cleared), with the state then
        "failures": earlier_failures(record),
    }


def _order(record: ExpansionRecord | None) -> dict[str, Any] | None:
    """The stale-placement verdict (docs/design.md 'Stale placements') from the record's stale
    placements (as of the report)."""
    if record is None:
        return None
    evidence = OrderEvidence.from_dict(record.stale_placements)
    return order_report(evidence.before_snapshot, evidence.after_snapshot)


def offsets_text(offsets: Mapping[str, Mapping[str, Any]] | None) -> str:
    """Offsets per topic and partition for people: ``orders p0 4723, p1 4701; payments p0 9``."""
    if not offsets:
        return "none"
    return "; ".join(
        f"{topic} "
        + ", ".join(f"p{p} {n}" for p, n in sorted(parts.items(), key=lambda i: int(i[0])))
        for topic, parts in sorted(offsets.items())
    )


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
    lines.append(f"Barrier offsets: {offsets_text(summary['barrier_offsets'])}")
    steps = ", ".join(
        f"{k} {'-' if v is None else f'{v:.1f}s'}" for k, v in summary["seconds_per_step"].items()
    )
    lines.append(f"Seconds per step: {steps}")
    restart = summary.get("restart") or {}
    if restart.get("mode"):
        lines.append(f"Restart: {restart['mode']} ({restart.get('reason', '')})")
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


def start(store: CoordinatorStore, record: ExpansionRecord) -> ExpansionRecord:
    """The report step's start, once `record` may become ``completed`` (job model vN+1 is
    written): a record an earlier step left behind is refused (InvalidTransitionError) before
    anything is written."""
    records.check_reachable(record, ExpansionStatus.COMPLETED, "report")
    return records.begin(store, record.expansion_id, "report", record=record)


def finish(
    store: CoordinatorStore,
    admin: KafkaAdmin,
    expansion_id: str,
    summary: dict[str, Any],
    holder: str,
) -> ExpansionRecord:
    """The report step's end: complete the record under `holder`'s lease, release the lease,
    then the outcome gate - green means done: `outcome.require` raises OutcomeMissingError
    naming each part of the outcome the cluster does not show (a grown topic below its target,
    vN+1 not the newest model or not what the live processors run, the record not completed)."""
    complete(store, expansion_id, summary, take(store, holder))
    give_up(store, holder)
    return outcome.require(store, admin, expansion_id)


def complete(
    store: CoordinatorStore, expansion_id: str, summary: dict[str, Any], lease: Lease | None
) -> ExpansionRecord:
    """Mark the expansion completed (the report step) with its timing summary."""
    done = records.record_step(
        store, expansion_id, "report", ExpansionStatus.COMPLETED, summary, lease
    )
    assert done is not None  # an expansion id always names a record (or require raised)
    return done


__all__ = [
    "build_summary",
    "complete",
    "finish",
    "mapping_diff",
    "offsets_text",
    "render_summary",
    "seconds_per_step",
    "start",
]
