"""The "Expansion under way" section: the step and its time, the grace countdown, the barrier
lag with its trend (a server-rendered SVG chart), the new version's launches, warm-up and log.

The job page's script (`live`) fetches the page's content, this section with it, every
`live.FETCH_S` and replaces it in place; the section's times count between fetches."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from airflow_samza_expand.airflow._ui.decode import parse_time
from airflow_samza_expand.airflow._ui.markup import _e, age, left, most_lagging, seconds, table
from airflow_samza_expand.airflow._ui.markup import when as _when
from airflow_samza_expand.airflow._ui.records import JobSnapshot
from airflow_samza_expand.airflow._ui.running import PROCESSOR_DOING, running_view

CHART_W, CHART_H, PAD = 420, 140, 28
COLOURS = ("#805ad5", "#dd6b20", "#38a169", "#d53f8c", "#319795", "#718096")


def running_section(snap: JobSnapshot, root: str) -> str:
    """The section, or "" when no expansion runs."""
    inner = running_fragment(snap)
    return f"<section id='running'>{inner}</section>" if inner else ""


def running_fragment(snap: JobSnapshot, now: datetime | None = None) -> str:
    """The section's content (the ``/jobs/<job>/running`` route), or "" when none runs."""
    now = now or datetime.now(UTC)
    run = running_view(snap, now)
    if run is None:
        return ""
    out = [
        f"<h2>Expansion under way: <code>{_e(run['expansion_id'])}</code></h2>",
        f"<p>Step <b>{_e(run['step'])}</b> ({_e(run['doing'])}) for "
        f"<b>{age(run['since'], run['elapsed_s'])}</b>, since {_when(run['since'])}; status "
        f"<span class='chip'>{_e(run['status'])}</span>.</p>",
    ]
    grace = run["grace"]
    if grace and grace["left_s"] is not None:
        out.append(
            f"<p>Producer refresh grace: <b>{left(grace['ends_at'], grace['left_s'], whole=True)}"
            f" s left</b> of {seconds(grace['length_s'])} (ends {_when(grace['ends_at'])}; "
            f"running for {age(grace['started_at'], grace['elapsed_s'])}); the barrier snapshot "
            "follows its end.</p>"
        )
    elif grace:
        out.append(
            f"<p>Producer refresh grace: running for {age(grace['started_at'], grace['elapsed_s'])}"
            f" (since {_when(grace['started_at'])}); the barrier snapshot follows its end "
            "(the DAG's <code>producer_refresh_grace_s</code>).</p>"
        )
    for p in run["new_processors"]:
        doing = PROCESSOR_DOING.get(p["state"], "running" if p["alive"] else "not alive")
        out.append(
            f"<p>New version: {_e(p['processor_id'])} ({_e(p['role'] or 'no role')}): "
            f"{_e(p['state'])} - {_e(doing)}</p>"
        )
    if run["barrier"]:
        out.append(_barrier_wait(run["barrier"], run.get("next_poll_in_s")))
        shown, rest = most_lagging(run["barrier"], lambda r: r["lag"])
        out.append(
            table(
                ["old partition", "barrier offset", "committed", "lag"],
                (
                    [
                        f"{_e(r['topic'])} {r['partition']}",
                        str(r["barrier_offset"]),
                        "-" if r["committed"] is None else str(r["committed"]),
                        "-" if r["lag"] is None else str(r["lag"]),
                    ]
                    for r in shown
                ),
            )
            + rest
        )
    if run["lag_history"]:  # the barrier's state from the record: waiting, or passed
        said = (
            f"The barrier passed at {_when(run['barrier_passed_at'])}; its lag as the barrier "
            "step polled it until then:"
            if run["barrier_passed_at"]
            else "The barrier lag as the barrier step polls it:"
        )
        out.append(f"<p>{said}</p>" + lag_chart(run["lag_history"]))
    out.append(_launches(run))
    return "".join(out)


def _barrier_wait(rows: Sequence[Mapping[str, Any]], next_poll_in_s: float | None = None) -> str:
    """What the barrier waits for now, in words (with when its step polls next)."""
    lags = [r["lag"] for r in rows if r["lag"] is not None]
    if not lags:
        return "<p>Barrier: waiting for the job's committed offsets to be read.</p>"
    behind = [r for r in rows if r["lag"]]
    if not behind:
        when = "" if next_poll_in_s is None else f", in about {next_poll_in_s:.0f} s"
        return (
            "<p>Barrier: every old partition is committed up to its barrier offset - the "
            f"barrier step sees it at its next poll{when}, then the stop step begins.</p>"
        )
    names = ", ".join(f"{r['topic']} {r['partition']} ({r['lag']})" for r in behind)
    return (
        f"<p>Barrier: waiting for the job to commit up to the barrier offset on {len(behind)} "
        f"old partition{'s' if len(behind) > 1 else ''}: {_e(names)}; lag {sum(lags)} in "
        "all.</p>"
    )


def _on(handle: Mapping[str, Any]) -> str:
    """`` on <host>`` where the launch's host is known (its pid and log are that host's)."""
    return f" on {_e(handle['host'])}" if handle.get("host") else ""


def _launches(run: Mapping[str, Any]) -> str:
    """The new version's detached launches (the standby warming up, a submit) and the current
    one's log tail."""
    out = [
        f"<p>Launched by step <b>{_e(h['step'])}</b> {age(h['started_at'], h['age_s'])} ago"
        f"{_on(h)} (pid {_e(h['pid'] or '-')}), log <code>{_e(h['log_path'])}</code></p>"
        for h in run["launches"]
    ]
    log = run["log"]
    if log is not None:
        note = f"<p class='muted'>{_e(log['note'])}</p>" if log["note"] else ""
        text = f"<pre class='tail'>{_e(log['tail'])}</pre>" if log["tail"] else ""
        out.append(f"<p>Current launch's log <code>{_e(log['path'])}</code> (tail)</p>{note}{text}")
    return "".join(out)


def lag_chart(samples: Sequence[Mapping[str, Any]]) -> str:
    """The barrier lag over time as an inline SVG: the total (thick) and each old partition."""
    times = [parse_time(s.get("at")) for s in samples]
    points = [(t, s) for t, s in zip(times, samples, strict=True) if t is not None]
    if not points:
        return ""
    t0, t1 = points[0][0], points[-1][0]
    span = max((t1 - t0).total_seconds(), 1.0)
    top = max([int(s.get("total") or 0) for _, s in points] + [1])
    names = sorted({n for _, s in points for n in s.get("partitions") or {}})

    def line(values: Sequence[tuple[datetime, float]], colour: str, width: int) -> str:
        xy = " ".join(
            f"{PAD + (t - t0).total_seconds() / span * (CHART_W - 2 * PAD):.1f},"
            f"{CHART_H - PAD - v / top * (CHART_H - 2 * PAD):.1f}"
            for t, v in values
        )
        return f"<polyline fill='none' stroke='{colour}' stroke-width='{width}' points='{xy}'/>"

    totals = [(t, float(s.get("total") or 0)) for t, s in points]
    lines = [line(totals, "#017cee", 3)]
    lines += [  # every sample marked: the first one shows before there is a line
        f"<circle cx='{PAD + (t - t0).total_seconds() / span * (CHART_W - 2 * PAD):.1f}' "
        f"cy='{CHART_H - PAD - v / top * (CHART_H - 2 * PAD):.1f}' r='3' fill='#017cee'/>"
        for t, v in totals
    ]
    legend = ["<tspan fill='#017cee'>total</tspan>"]
    for i, name in enumerate(names):
        colour = COLOURS[i % len(COLOURS)]
        values = [(t, float((s.get("partitions") or {}).get(name, 0))) for t, s in points]
        lines.append(line(values, colour, 1))
        legend.append(f"<tspan fill='{colour}'>{_e(name)}</tspan>")
    last = int(points[-1][1].get("total") or 0)
    return (
        f"<svg class='lag' width='{CHART_W}' height='{CHART_H}' role='img' "
        f"xmlns='http://www.w3.org/2000/svg'><title>barrier lag: {top} at most, {last} now, "
        f"over {span:.0f} s</title><rect width='100%' height='100%' fill='#f7fafc'/>"
        f"<text x='4' y='{PAD - 8}' font-size='11'>lag {top}</text>"
        f"<text x='4' y='{CHART_H - PAD + 4}' font-size='11'>0</text>"
        f"<text x='{CHART_W - PAD}' y='{CHART_H - 8}' font-size='11' text-anchor='end'>"
        f"{span:.0f} s</text>"
        + "".join(lines)
        + f"<text x='{PAD}' y='{CHART_H - 8}' font-size='11'>{' '.join(legend)}</text></svg>"
    )
