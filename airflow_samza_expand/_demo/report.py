"""The demo's report: ``report.json`` (`build_report` lists its fields) and the text report (the
SVG image of the partitions -> buckets -> tasks diagram: `core._render.render_svg`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_samza_expand._protocol.steps import step_title
from airflow_samza_expand.core._clock import parse_iso
from airflow_samza_expand.core._order import DEFAULT_STALE_QUIET_S
from airflow_samza_expand.core._render import render_diagram, render_mapping_table
from airflow_samza_expand.core.model import JobModel

if TYPE_CHECKING:
    from airflow_samza_expand.core._record import ExpansionRecord

# the barrier task's two timed phases, as the report names them (`_protocol.steps.STEPS`)
BARRIER_GRACE, BARRIER_DRAIN = step_title("barrier_snapshot"), step_title("barrier")

DOWNTIME_TARGET_RATIO = 1.5  # a cold restart (stop, then start)
WARM_TARGET_RATIO = 0.3  # the warm restart: a standby takes over
IN_PLACE_TARGET_RATIO = 0.05  # the switch in place
TARGETS = {"in-place": IN_PLACE_TARGET_RATIO, "warm": WARM_TARGET_RATIO}


def restart_of(outcome: Any) -> str:
    """How an expansion restarted the job, by the strategy's name: the one its record names
    (``in-place``, ``in-app``, ``task``, ``warm``, ``cold``); without one, ``warm`` when the
    vN+1 standby took over, else ``cold``."""
    mode = getattr(outcome, "restart", None)
    if mode:
        return str(mode)
    return "warm" if getattr(outcome, "standby_took_over", False) else "cold"


def _max(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def last_stale_s(record: ExpansionRecord | None) -> float | None:
    """Seconds from the expansion (end of the expand step) to the last stale placement the
    barrier saw, from the expansion record; None when it saw none."""
    evidence = getattr(record, "stale_placements", None) or {}
    expand = record.steps.get("expand") if record is not None else None
    if not evidence.get("last_stale_at") or expand is None or not expand.ended_at:
        return None
    return parse_iso(evidence["last_stale_at"]).timestamp() - parse_iso(expand.ended_at).timestamp()


def snapshot_bound_s(grace_s: float, stale_quiet_s: float, last_stale: float | None) -> float:
    """Seconds after the expansion at which the barrier may snapshot: the end of
    the grace, or of the quiet window after the last stale placement when that is later."""
    return max(grace_s, max(last_stale or 0.0, 0.0) + stale_quiet_s)


def build_report(
    *,
    scenario: Any,
    verification: Any,
    total_s: float,
    step_seconds: dict[str, float],
    records: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """report.json content. ``records``: the expansion records of ``scenario.outcomes``
    (default: read from its store)."""
    cfg = scenario.cfg
    if records is None:
        from airflow_samza_expand._demo.stale import expansion_records

        records = expansion_records(scenario)
    quiet = cfg.stale_quiet_s
    if quiet is None:
        quiet = min(DEFAULT_STALE_QUIET_S, cfg.grace_s)
    expansions = []
    latencies = [x.to_dict() for x in getattr(scenario, "latencies", None) or []]
    for i, (o, record) in enumerate(zip(scenario.outcomes, records, strict=True)):
        steps = (o.summary or {}).get("seconds_per_step") or {}
        grace, drain = cfg.grace_s, o.probe.get("drain_s")
        stale_s = last_stale_s(record)
        snapshot_s = snapshot_bound_s(grace, quiet, stale_s)
        barrier_wait = None
        grace_step, drain_step = steps.get(BARRIER_GRACE), steps.get(BARRIER_DRAIN)
        if grace_step is not None and drain_step is not None:
            barrier_wait = round(grace_step + drain_step, 3)
        bound = None if drain is None else round(snapshot_s + drain + cfg.poll_s, 3)
        expansions.append(
            {
                "partitions": {"before": o.counts[0], "after": o.counts[1]},
                "dag_state": o.state,
                "tasks": o.tasks,
                "seconds_per_step": steps,
                "barrier_wait_s": barrier_wait,
                "barrier_bound_s": bound,
                "barrier_within_bound": None
                if barrier_wait is None or bound is None
                else barrier_wait <= bound,
                "grace_s": grace,
                "stale_quiet_s": quiet,
                "last_stale_s": None if stale_s is None else round(stale_s, 3),
                "snapshot_bound_s": round(snapshot_s, 3),
                "drain_s": drain,
                "poll_interval_s": cfg.poll_s,
                "downtime_s": o.probe.get("downtime_s"),
                "restart": restart_of(o),
                "moved_key_latency": latencies[i] if i < len(latencies) else None,
                "report_downtime_s": (o.summary or {}).get("downtime_s"),
                "wall_s": round(o.wall_s, 3),
            }
        )
    downtime = _max([e["downtime_s"] for e in expansions])
    plain = scenario.plain_restart_s
    ratio = round(downtime / plain, 3) if downtime is not None and plain else None
    modes = {e["restart"] for e in expansions}
    restart = "/".join(sorted(modes)) or "cold"  # one name, or each one of a mixed run
    moved = {e["restart"]: e["moved_key_latency"] for e in expansions if e["moved_key_latency"]}
    v = verification
    return {
        "job_name": scenario.job_name,
        "topic": scenario.topic,
        "run_mode": cfg.run_mode,
        "naive_writer": cfg.naive,
        "verification": {
            "ok": v.ok,
            "keys": v.keys,
            "records_produced": v.records_produced,
            "records_counted": v.records_counted,
            "count_mismatches": v.count_mismatches,
            "order_violations": v.order_violations,
            "count_resets": v.count_resets,
            "partitions_consumed": v.partitions_consumed,
            "problems": v.problems[:50],
        },
        "job_model_versions": v.job_model_versions,
        "timings": {
            "barrier_wait_s": _max([e["barrier_wait_s"] for e in expansions]),
            "downtime_s": downtime,
            "plain_restart_s": None if plain is None else round(plain, 3),
            "downtime_ratio": ratio,
            "restart": restart,
            "downtime_target_ratio": TARGETS.get(restart, DOWNTIME_TARGET_RATIO),
            "moved_key_latency": moved,
            "grace_s": cfg.grace_s,
            "drain_s": _max([e["drain_s"] for e in expansions]),
            "poll_interval_s": cfg.poll_s,
            "steps": step_seconds,
            "total_s": round(total_s, 3),
        },
        "expansions": expansions,
        "job_models": [m.to_dict() for m in scenario.models],
    }


def render_text(report: dict[str, Any], models: Sequence[JobModel]) -> str:
    """The printed report: mapping before/after, diagram, per-step timings, verdict, figures."""
    first, last = models[0], models[-1]
    initial = {s.stream: s.initial for s in last.streams}
    new = [ssp for ssp in last.ssp_to_task if ssp.partition >= initial[ssp.stream]]
    out = [
        "",
        f"== SSP -> task mapping before (job model v{first.version}) ==",
        render_mapping_table(first),
        "",
        f"== SSP -> task mapping after (job model v{last.version}) ==",
        render_mapping_table(last, new),
        "",
        "== Partitions -> buckets -> tasks ==",
        render_diagram(last, new),
        "",
        "== Per-step timings (s) ==",
    ]
    columns = {  # the report's step names (the DAG's task ids) -> a short column head
        "plan": "plan",
        "expand": "expand",
        BARRIER_GRACE: "grace",
        BARRIER_DRAIN: "barrier",
        "stop_job": "stop",
        "write_job_model": "write",
        "submit": "submit",
        "ack": "ack",
    }
    out.append(f"{'expansion':<10}" + "".join(f"{c:>9}" for c in columns.values()))
    for e in report["expansions"]:
        cells = "".join(
            f"{'-' if e['seconds_per_step'].get(s) is None else e['seconds_per_step'][s]:>9.1f}"
            if e["seconds_per_step"].get(s) is not None
            else f"{'-':>9}"
            for s in columns
        )
        label = f"{e['partitions']['before']} -> {e['partitions']['after']}"
        out.append(f"{label:<10}{cells}")
    out += ["", "== Demo steps (s) =="]
    for name, seconds in report["timings"]["steps"].items():
        out.append(f"  {seconds:7.1f}  {name}")
    v = report["verification"]
    out += [
        "",
        "== Verification ==",
        f"{'PASS' if v['ok'] else 'FAIL'}: {v['keys']} keys, {v['records_produced']} records "
        f"produced, {v['records_counted']} counted; count mismatches "
        f"{len(v['count_mismatches'])}, keys with order violations {len(v['order_violations'])},"
        f" keys whose count went back {len(v['count_resets'])}; partitions consumed "
        f"{v['partitions_consumed']}; job model versions {report['job_model_versions']}",
    ]
    out += [f"  - {p}" for p in v["problems"][:8]]
    out += ["", *figure_lines(report)]
    return "\n".join(out)


def figure_lines(report: dict[str, Any]) -> list[str]:
    """The last lines: downtime vs plain restart, barrier wait vs its bound."""
    t = report["timings"]
    lines = []
    if t["downtime_s"] is not None and t["plain_restart_s"]:
        verdict = "OK" if t["downtime_ratio"] <= t["downtime_target_ratio"] else "ABOVE TARGET"
        target = f"(target <= {t['downtime_target_ratio']}x: {verdict})"
        if t.get("restart") == "in-place":
            lines.append(
                f"Downtime (in-place switch): {t['downtime_s']:.2f}s vs plain restart "
                f"{t['plain_restart_s']:.1f}s = {t['downtime_ratio']:.3f}x {target}"
            )
        else:
            lines.append(
                f"Downtime ({t.get('restart', 'cold')} restart): expansion {t['downtime_s']:.2f}s"
                f" vs plain restart {t['plain_restart_s']:.2f}s = {t['downtime_ratio']:.2f}x "
                f"{target}"
            )
    for e in report["expansions"]:
        moved = e.get("moved_key_latency")
        if moved and moved["median_s"] is not None:
            lines.append(
                f"Moved keys {e['partitions']['before']}->{e['partitions']['after']} "
                f"({e['restart']}): first record in a new partition -> processed: median "
                f"{moved['median_s']:.2f}s, max {moved['max_s']:.2f}s over {moved['keys']} keys"
                + (f" ({moved['unprocessed']} not processed)" if moved["unprocessed"] else "")
            )
    for e in report["expansions"]:
        if e["barrier_wait_s"] is None or e["drain_s"] is None:
            continue
        snapshot = f"grace {e['grace_s']:.2f}s"
        if e.get("snapshot_bound_s", e["grace_s"]) > e["grace_s"]:
            snapshot = (
                f"max(grace {e['grace_s']:.2f}s, last stale placement {e['last_stale_s']:.2f}s "
                f"+ quiet {e['stale_quiet_s']:.2f}s)"
            )
        lines.append(
            f"Barrier {e['partitions']['before']}->{e['partitions']['after']}: waited "
            f"{e['barrier_wait_s']:.2f}s vs {snapshot} + drain {e['drain_s']:.2f}s + poll "
            f"{e['poll_interval_s']:.2f}s = {e['barrier_bound_s']:.2f}s"
            f" ({'OK' if e['barrier_within_bound'] else 'ABOVE BOUND'})"
        )
    lines.append(
        f"Verdict: {'PASS' if report['verification']['ok'] else 'FAIL'} in "
        f"{t['total_s']:.0f}s total"
    )
    return lines
