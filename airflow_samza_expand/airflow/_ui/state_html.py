"""The job page's verdicts: the top line (the operator's next action, the decision
`samza-expand status` prints as "next:"), each expansion's steps as Airflow ran them, and its
barrier's state from its record alone (so "passed" and "waiting" never show together).

Whatever is judged at the moment of a fetch (alive, held, the next action) carries a stale
twin: while the page cannot update (`live`), ``#live.stale`` shows the twin instead."""

from __future__ import annotations

from collections.abc import Sequence

from airflow_samza_expand._protocol.restart.registry import STRATEGIES
from airflow_samza_expand._protocol.status.next_action import NextAction, next_actions
from airflow_samza_expand._protocol.steps import STEPS
from airflow_samza_expand.airflow._ui.markup import _e, seconds, table
from airflow_samza_expand.airflow._ui.markup import when as _when
from airflow_samza_expand.airflow._ui.records import Expansion, JobSnapshot, Step, TaskRun

UNKNOWN = "unknown"  # what a judgement of the last update reads while the page is stale
DONE = frozenset({"completed", "failed"})


def fresh(html: str, stale: str = UNKNOWN) -> str:
    """`html` while the page is up to date, `stale` (muted) while it is not."""
    return (
        f"<span class='fresh-only'>{html}</span><span class='stale-only muted'>{_e(stale)}</span>"
    )


def actions(snap: JobSnapshot) -> list[NextAction]:
    """The operator's next actions (most urgent first), from the page's own reads."""
    return [] if snap.status is None else next_actions(snap.status)


def next_section(snap: JobSnapshot) -> str:
    """The top line: the most urgent next action, then the others."""
    found = actions(snap)
    if not found:
        return ""
    first, rest = found[0], found[1:]
    cls = "box" if first.urgent else "box warn" if first.kind == "waiting" else "box okbox"
    more = "".join(f"<li>{_e(a.text)}</li>" for a in rest)
    return (
        f"<div id='next' class='{cls}' data-kind='{_e(first.kind)}'>"
        "<span class='stale-only'><b>As of the last update (not current):</b> </span>"
        f"<b>Next:</b> {_e(first.text)}" + (f"<ul>{more}</ul>" if more else "") + "</div>"
    )


def barrier_state(e: Expansion) -> str:
    """The expansion's barrier as its record says (one source): passed, waiting, not taken."""
    if e.barrier_passed_at:
        return f"passed at {_when(e.barrier_passed_at)}"
    if not e.barrier:
        return "not taken yet" if e.status not in DONE else "never taken"
    if e.status == "failed":
        return "taken, never passed (the expansion failed)"
    if e.status == "barrier-snapshot":
        return "waiting: the job drains up to it"
    return "passed"


def _protocol_note(e: Expansion, task_id: str) -> str:
    """The protocol's own step time where it means something else than the task's duration
    (one task, several protocol steps), and what the task did under the restart chosen."""
    mine = [s for s in STEPS if s.task_id == task_id]
    out = []
    if len(mine) > 1:
        times = {s.record_step: s for s in e.steps}
        parts = [f"{s.phase} {_took(times[s.record_step])}" for s in mine if s.record_step in times]
        if parts:
            out.append("protocol's step time: " + "; ".join(parts))
    word = step_wording(e, mine[0].record_step) if mine else ""
    return "; ".join(out + ([word] if word else []))


def _took(step: Step) -> str:
    return (
        "(running)" if step.duration_s is None and not step.ended_at else seconds(step.duration_s)
    )


def step_wording(e: Expansion, record_step: str) -> str:
    """What a step does under the expansion's restart, when that is nothing (in place stops
    nothing, launches nothing)."""
    strategy = STRATEGIES.get(e.restart or "")
    if strategy is None:
        return ""
    if record_step == "stop" and not strategy.stops_job:
        return f"stops nothing ({strategy.mode} restart)"
    if record_step == "standby" and not strategy.launches_standby:
        return f"launches nothing ({strategy.mode} restart)"
    if record_step == "submit" and not strategy.submits_job:
        return f"launches nothing ({strategy.mode} restart)"
    return ""


def steps_table(e: Expansion, airflow_root: str) -> str:
    """Airflow's task instances of the run (durations linked to the task's log), else the
    record's steps with the protocol's own step times."""
    if e.tasks:
        return table(
            ["task", "state", "start", "end", "duration (Airflow)", "protocol"],
            (_task_row(e, t, airflow_root) for t in e.tasks),
        )
    return "<p class='muted'>No Airflow task instances for this expansion here; the " + (
        "protocol's record times:</p>"
        + table(
            ["step", "start", "end", "step time (protocol's record)", "protocol"],
            (_step_row(e, s) for s in e.steps),
        )
    )


def _task_row(e: Expansion, t: TaskRun, airflow_root: str) -> Sequence[str]:
    href = _e(airflow_root + t.log_path)
    tries = f" (try {t.try_number})" if t.try_number and t.try_number > 1 else ""
    return [
        f"<a href='{href}' target='_blank' rel='noopener' title='its log in Airflow'>"
        f"{_e(t.task_id)}</a>",
        _e((t.state or "none") + tries),
        _when(t.started_at),
        _when(t.ended_at),
        f"<span class='num'>{seconds(t.duration_s)}</span>",
        _e(_protocol_note(e, t.task_id)),
    ]


def _step_row(e: Expansion, s: Step) -> Sequence[str]:
    return [
        _e(s.name),
        _when(s.started_at),
        _when(s.ended_at),
        f"<span class='num'>{seconds(s.duration_s)}</span>",
        _e(step_wording(e, s.record_step)),
    ]


__all__ = ["barrier_state", "fresh", "next_section", "step_wording", "steps_table"]
