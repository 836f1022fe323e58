"""A launch of job model vN+1 as the expansion record keeps it, and whether it came up, as any
worker can tell: from the record and the processors' heartbeats, never from a pid or a file of
one machine.

The submit and standby steps note a launch in the record *before* they start anything
(``results["launch"]``: launch id, time, host, application, window, attempt, the step, the
processors of vN+1 already alive) and add what they learn after (pid, log, the processor that
came up). A later try - on this worker or another - then judges that launch (`judge`):

* **up**: a processor of vN+1 is alive (its heartbeat younger than its TTL) that was not alive
  before the launch: no second launch;
* **starting**: no such processor yet, but the launch is younger than its window (Spark starts,
  the first heartbeat is not written yet): wait, then judge again;
* **gone**: the window passed with no new live processor of vN+1, or a processor of vN+1 ended
  after the launch: launch again.

Every worker judges a launch alike: the launching host's pid and state file are not read.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_samza_expand._protocol import records
from airflow_samza_expand._protocol.job import launch as detached
from airflow_samza_expand.core._clock import now_iso, parse_iso, utc_now
from airflow_samza_expand.core._lease import Lease
from airflow_samza_expand.core._liveness import FINAL_STATES, ProcessorStatus, is_alive
from airflow_samza_expand.core._record import ExpansionRecord
from airflow_samza_expand.store import CoordinatorStore

LAUNCH = "launch"  # the record's ``results`` key of the newest launch
UP, STARTING, GONE, NONE = "up", "starting", "gone", "none"
WORKING = ("starting", "standby", "running")


def facts_of(record: ExpansionRecord | None) -> dict[str, Any] | None:
    """The newest launch the record notes (``results["launch"]``), or None."""
    doc = record.results.get(LAUNCH) if record is not None else None
    return dict(doc) if isinstance(doc, Mapping) and doc.get("launch_id") else None


def new_facts(
    record: ExpansionRecord | None,
    *,
    application: str | None,
    window_s: float = detached.LAUNCH_WINDOW_S,
    step: str = "submit",
    live: Iterable[str] = (),
) -> dict[str, Any]:
    """The facts of a launch about to start: a new launch id, now, this host, the attempt
    after the record's last one, the step, the ``live`` processors of the launched version
    (their heartbeats do not tell that this launch came up)."""
    earlier = facts_of(record) or {}
    return {
        "launch_id": uuid.uuid4().hex[:12],
        "launched_at": now_iso(),
        "host": detached.this_host(),
        "application": application,
        "window_s": float(window_s),
        "attempt": int(earlier.get("attempt") or 0) + 1,
        "step": step,
        "live_before": sorted(live),
    }


def note(
    store: CoordinatorStore,
    expansion_id: str,
    facts: Mapping[str, Any],
    lease: Lease | None = None,
) -> dict[str, Any]:
    """Store ``facts`` as the record's launch; facts of the same launch id are merged (pid, log,
    processor added after the start). Returns the launch as stored."""

    def change(current: ExpansionRecord) -> ExpansionRecord:
        old = facts_of(current) or {}
        merged = {**old, **facts} if old.get("launch_id") == facts["launch_id"] else dict(facts)
        return current.with_result(LAUNCH, merged)

    return facts_of(records.update(store, expansion_id, change, fence=lease)) or dict(facts)


@dataclass(frozen=True)
class LaunchView:
    """`judge`'s answer: ``state`` (up, starting, gone, none), why, and for ``starting`` the
    seconds left of the launch's window."""

    state: str
    reason: str
    wait_s: float = 0.0


def live_of(processors: Mapping[str, Mapping[str, Any]], version: int | None) -> list[str]:
    """Processors of ``version`` alive (heartbeat younger than their TTL) and working."""
    return sorted(
        pid
        for pid, p in processors.items()
        if p.get("job_model_version") == version and p.get("state") in WORKING and is_alive(p)
    )


def judge(
    facts: Mapping[str, Any] | None,
    processors: Mapping[str, Mapping[str, Any]],
    version: int | None,
    *,
    now: datetime | None = None,
) -> LaunchView:
    """Whether the launch ``facts`` came up (module docstring), from the record and the
    heartbeats alone: the same answer on every worker."""
    now = now or utc_now()
    before = set((facts or {}).get("live_before") or ())
    live = [pid for pid in live_of(processors, version) if pid not in before]
    if live:
        return LaunchView(UP, f"processor(s) {', '.join(live)} of v{version} alive")
    if not facts:
        return LaunchView(NONE, "no launch recorded")
    where = f"launch {facts.get('launch_id', '?')} on host {facts.get('host') or '?'}"
    launched = _when(facts)
    ended = [p for p in _ended_after(processors, version, launched) if p not in before]
    if ended:
        return LaunchView(GONE, f"{where}: processor(s) {', '.join(ended)} of v{version} ended")
    window = float(facts.get("window_s") or detached.LAUNCH_WINDOW_S)
    age = (now - launched).total_seconds() if launched is not None else window
    if age < window:
        return LaunchView(
            STARTING,
            f"{where} is {age:.0f} s old, no processor of v{version} heartbeats yet "
            f"(it may still be starting: waiting up to {window:.0f} s from the launch)",
            window - age,
        )
    return LaunchView(GONE, f"no processor of v{version} came up within {window:.0f} s of {where}")


def _when(facts: Mapping[str, Any]) -> datetime | None:
    try:
        return parse_iso(str(facts.get("launched_at") or facts.get("started_at")))
    except (TypeError, ValueError):
        return None


def _ended_after(
    processors: Mapping[str, Mapping[str, Any]], version: int | None, launched: datetime | None
) -> list[str]:
    """Processors of ``version`` that heartbeated a final state after ``launched``."""
    if launched is None:
        return []
    out = []
    for pid, p in processors.items():
        status = ProcessorStatus.from_record(pid, p)
        if status.job_model_version != version or status.state not in FINAL_STATES:
            continue
        try:
            if parse_iso(str(status.heartbeat_at)) >= launched:
                out.append(pid)
        except ValueError:
            continue
    return sorted(out)


__all__ = [
    "GONE",
    "LAUNCH",
    "NONE",
    "STARTING",
    "UP",
    "LaunchView",
    "facts_of",
    "judge",
    "live_of",
    "new_facts",
    "note",
]
