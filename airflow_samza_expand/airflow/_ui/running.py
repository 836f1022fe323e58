"""An expansion under way, from its record: the step it is in and for how long, the producer
refresh grace, the barrier lag per old partition. Pure (no store, no Kafka)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from airflow_samza_expand._protocol.steps import step_title
from airflow_samza_expand.airflow._ui.decode import age_s, parse_time
from airflow_samza_expand.airflow._ui.records import Expansion, JobSnapshot
from airflow_samza_expand.airflow._ui.state_html import step_wording

DONE = frozenset({"completed", "failed"})
LOG_LINES = 20  # lines of the current launch's log the running section shows
# what a new version's processor is doing, by the state its heartbeat reports
PROCESSOR_DOING = {"starting": "warming up", "standby": "warm, waiting to take over"}
WARMING = "waiting for the new version's standby to warm up, then stopping the running version"
# what an expansion of a status waits for, until its next step (record step name) starts
NEXT_STEP = {
    "planned": ("expand", "growing the topics"),
    "expanded": ("barrier_snapshot", "producers learn the new partition count"),
    "barrier-snapshot": (
        "barrier",
        "the job commits up to the barrier offset on every old partition",
    ),
    "barrier-passed": ("stop", "stopping the running job model version"),
    "job-stopped": ("write", "writing the new job model"),
    "job-model-written": ("submit", "starting the new version (or handing over to it)"),
    "submitted": ("ack", "waiting for a processor of the new version"),
}


def running_expansion(snapshot: JobSnapshot) -> Expansion | None:
    """The newest expansion that is neither completed nor failed, if any."""
    return next((e for e in snapshot.expansions if e.status not in DONE), None)


def running_view(snapshot: JobSnapshot, now: datetime | None = None) -> dict[str, Any] | None:
    """What the "Expansion under way" section shows (and the JSON's ``running``), or None."""
    expansion = running_expansion(snapshot)
    if expansion is None:
        return None
    now = now or datetime.now(UTC)
    open_steps = [s for s in expansion.steps if s.started_at and not s.ended_at]
    if open_steps:
        last = open_steps[-1]
        step, since = last.record_step or last.name, last.started_at
        doing = step_wording(expansion, step) or "running"  # in place: the stop stops nothing
    else:
        step, doing = NEXT_STEP.get(expansion.status, (expansion.status, "next step"))
        doing = step_wording(expansion, step) or doing  # nothing to do under this restart
        ends = [s.ended_at for s in expansion.steps if s.ended_at]
        since = max(ends) if ends else expansion.updated_at
    grace = None
    if expansion.status == "expanded" and not expansion.barrier and expansion.grace_started_at:
        ends = parse_time(expansion.grace_ends_at)
        grace = {
            "started_at": expansion.grace_started_at,
            "elapsed_s": age_s(expansion.grace_started_at, now),
            "length_s": expansion.grace_s,  # None: the barrier step has not recorded it yet
            "ends_at": expansion.grace_ends_at,
            "left_s": max(0.0, round((ends - now).total_seconds(), 1)) if ends else None,
        }
    if grace and step == "barrier_snapshot":  # the snapshot step's first wait is the grace
        doing = "waiting out the producer refresh grace, then the snapshot"
    lag = {(r.topic, r.partition): r for r in snapshot.barrier_rows}
    mine = snapshot.barrier_of == expansion.expansion_id
    barrier = [
        {
            "topic": topic,
            "partition": partition,
            "barrier_offset": offset,
            "committed": lag[(topic, partition)].committed if mine else None,
            "lag": lag[(topic, partition)].lag if mine else None,
        }
        for topic, parts in sorted(expansion.barrier.items())
        for partition, offset in sorted(parts.items())
        if (topic, partition) in lag or not mine
    ]
    new = [  # the new version's processors: a standby warming up, then the one that took over
        {"processor_id": p.processor_id, "role": p.role, "state": p.state, "alive": p.alive}
        for p in snapshot.processors
        if expansion.new_version is not None and p.job_model_version == expansion.new_version
    ]
    if step == "stop" and any(p["state"] == "starting" and p["alive"] for p in new):
        doing = WARMING  # a warm handover: the stop waits for the standby's warm-up first
    return {
        "expansion_id": expansion.expansion_id,
        "new_processors": new,
        "status": expansion.status,
        "step": step_title(step),  # the DAG's task id (protocol.steps.STEPS)
        "record_step": step,
        "doing": doing,
        "since": since,
        "elapsed_s": age_s(since, now),
        "grace": grace,
        "barrier": barrier if expansion.status == "barrier-snapshot" else [],
        "barrier_passed_at": expansion.barrier_passed_at,
        "lag_history": [dict(x) for x in expansion.lag_history],
        "next_poll_in_s": next_poll_in_s(expansion.lag_history, now),
        "launches": [_launch(h, now) for h in expansion.launches],
        "log": _log(snapshot, expansion),
    }


def next_poll_in_s(samples: Sequence[Mapping[str, Any]], now: datetime) -> float | None:
    """When the barrier step polls next, in seconds from ``now``: its last lag sample plus the
    median gap between its samples (each poll records one); None before two samples."""
    times = sorted(t for t in (parse_time(s.get("at")) for s in samples) if t is not None)
    if len(times) < 2:
        return None
    gaps = sorted((b - a).total_seconds() for a, b in zip(times, times[1:], strict=False))
    due = times[-1].timestamp() + gaps[len(gaps) // 2]
    return round(max(due - now.timestamp(), 0.0), 1)


def _launch(handle: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """A detached launch of the new version, for the page: which step, when, its log."""
    return {
        "step": step_title(str(handle.get("step"))),
        "started_at": handle.get("started_at"),
        "age_s": age_s(handle.get("started_at"), now),
        "pid": handle.get("pid"),
        "host": handle.get("host"),  # the pid and the log are that host's
        "log_path": handle.get("log_path"),
    }


def _log(snapshot: JobSnapshot, expansion: Expansion) -> dict[str, Any] | None:
    """The tail of the current launch's log (the page's log section reads the same file)."""
    log = snapshot.log
    if log is None or log.path != expansion.log_path:
        return None
    lines = log.text.splitlines()[-LOG_LINES:]
    return {"path": log.path, "tail": "\n".join(lines), "note": log.note}
