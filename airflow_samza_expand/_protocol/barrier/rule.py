"""The ordering barrier's rule (docs/design.md 'The ordering barrier'): when it may snapshot,
whether the job's own count of stale placements may stand for the barrier's scan, and the next
target of that count. Pure: no Kafka, no store (an import contract keeps it so); the reads, the
evidence and the wait call it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from airflow_samza_expand.core._order import DEFAULT_STALE_QUIET_S

Action = Literal["wait", "snapshot", "timeout"]


@dataclass(frozen=True)
class BarrierDecision:
    """What the barrier poll does now, why (one log line), and when to look again."""

    action: Action
    reason: str
    wait_s: float = 0.0


def decide_snapshot(
    *,
    now: float,
    expanded_at: float,
    grace_ends: float,
    deadline: float | None,
    stale_quiet_s: float = DEFAULT_STALE_QUIET_S,
    last_stale_at: float | None,
    stale_records: int,
    caught_up: bool,
    backlog: int = 0,
) -> BarrierDecision:
    """Snapshot after the grace and ``stale_quiet_s`` without a stale placement, scan caught up.

    Times are epoch seconds. The quiet window runs from the expansion (when the scan started)
    or from the last stale placement, whichever is later. ``last_stale_at``: when the scan last
    found a stale placement (None: never). ``deadline``: the barrier's timeout (None: none);
    past it the barrier gives up with ``timeout`` unless it may snapshot right now.
    """
    if stale_quiet_s < 0:
        raise ValueError(f"stale_quiet_s must be >= 0, got {stale_quiet_s}")
    quiet_from = max(expanded_at, last_stale_at if last_stale_at is not None else expanded_at)
    quiet_ends = quiet_from + stale_quiet_s
    if now >= grace_ends and now >= quiet_ends and caught_up:
        held = (
            f"; {stale_records} stale placement(s) before it, held by the barrier"
            if stale_records
            else ""
        )
        return BarrierDecision(
            "snapshot", f"grace over and no stale placement for {stale_quiet_s:g} s{held}"
        )
    if now < grace_ends:
        why = f"producer refresh grace: {grace_ends - now:.0f} s left"
        wait = grace_ends - now
    elif not caught_up:
        why = f"checking {backlog} record(s) appended to the old partitions for stale placements"
        wait = 0.0
    elif last_stale_at is None:
        why = (
            f"watching the old partitions for stale placements for {stale_quiet_s:g} s after the "
            f"expansion ({quiet_ends - now:.0f} s left, none so far)"
        )
        wait = quiet_ends - now
    else:
        why = (
            f"stale placements still arriving ({stale_records} so far, the last "
            f"{now - (last_stale_at or now):.0f} s ago): producers with old metadata write to "
            f"the old partitions; waiting for {stale_quiet_s:g} s without one "
            f"({quiet_ends - now:.0f} s left)"
        )
        wait = quiet_ends - now
    if deadline is not None and now >= deadline:
        return BarrierDecision("timeout", f"barrier timeout reached while waiting: {why}")
    if deadline is not None:
        wait = min(wait, deadline - now)
    return BarrierDecision("wait", why, max(wait, 0.0))


@dataclass(frozen=True)
class JobCoverage:
    """What a processor's count covers at one barrier look (`job_coverage`)."""

    usable: bool  # it covers what the evidence already counted: it may replace it
    caught_up: bool  # ... and the old partitions up to the barrier's previous look
    backlog: int  # records appended (as of this look) that it has not checked yet


def job_coverage(
    checked: Mapping[str, Mapping[int, int]],
    covered: Mapping[str, Mapping[int, int]],
    ends_before: Mapping[str, Mapping[int, int]] | None,
    ends_now: Mapping[str, Mapping[int, int]],
) -> JobCoverage:
    """Whether the barrier may take a processor's count as its look at the old partitions.

    The rule: the count is *usable* when, on every old partition, it has checked at least what
    the evidence already covers (``covered``: ``scan_positions``); it is *caught up* when it has
    also checked everything up to the barrier's target (``ends_before``: the old partitions'
    end offsets at an earlier look, kept until a count reaches them; with none, ``ends_now``).
    A job reads behind the producers by its batch: a target that stays put until reached is
    reached by a job that keeps up, however short the barrier's poll interval; a new target is
    set then (`next_target`). A partition the count does not name is not checked.
    """
    target = ends_before or ends_now

    def at(offsets: Mapping[str, Mapping[int, int]], topic: str, partition: int) -> int:
        return int(offsets.get(topic, {}).get(partition, 0))

    def reaches(bound: Mapping[str, Mapping[int, int]]) -> bool:
        return all(
            topic in checked and partition in checked[topic]
            and checked[topic][partition] >= offset
            for topic, ps in bound.items()
            for partition, offset in ps.items()
        )  # fmt: skip

    usable = reaches(covered)
    backlog = sum(
        max(0, offset - at(checked, topic, partition))
        for topic, ps in ends_now.items()
        for partition, offset in ps.items()
    )
    return JobCoverage(usable, usable and reaches(target), backlog)


def next_target(
    coverage: JobCoverage,
    target: Mapping[str, Mapping[int, int]] | None,
    ends_now: Mapping[str, Mapping[int, int]],
) -> Mapping[str, Mapping[int, int]]:
    """The barrier's target for the job's count after a look (`job_coverage`): the end offsets
    now once the count reached the old target (or there was none), else the old one."""
    return ends_now if coverage.caught_up or not target else target


__all__ = [
    "Action",
    "BarrierDecision",
    "JobCoverage",
    "decide_snapshot",
    "job_coverage",
    "next_target",
]
