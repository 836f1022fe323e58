"""Proof of order (DESIGN.md rule 1.5): when the barrier may snapshot, what the expansion record
keeps about stale placements, and the report's ``order:`` line. Pure functions.

The barrier snapshots only after the producer refresh grace **and** a quiet window
(``stale_quiet_s``) in which the scan of the old partitions found no stale placement and is
caught up; stale placements that keep arriving extend the wait up to the barrier's deadline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from airflow_samza_expand.core.stale import StalePlacement, StaleSummary

DEFAULT_STALE_QUIET_S = 30.0  # three poll intervals of the barrier sensor (10 s)
ON_STALE_PLACEMENT = ("warn", "fail")

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
    quiet_s: float = DEFAULT_STALE_QUIET_S,
    last_stale_at: float | None,
    stale_records: int,
    caught_up: bool,
    backlog: int = 0,
) -> BarrierDecision:
    """Snapshot after the grace and ``quiet_s`` without a stale placement, scan caught up.

    Times are epoch seconds. The quiet window runs from the expansion (when the scan started)
    or from the last stale placement, whichever is later. ``last_stale_at``: when the scan last
    found a stale placement (None: never). ``deadline``: the barrier's timeout (None: none);
    past it the barrier gives up with ``timeout`` unless it may snapshot right now.
    """
    if quiet_s < 0:
        raise ValueError(f"stale_quiet_s must be >= 0, got {quiet_s}")
    quiet_from = max(expanded_at, last_stale_at if last_stale_at is not None else expanded_at)
    quiet_ends = quiet_from + quiet_s
    if now >= grace_ends and now >= quiet_ends and caught_up:
        held = (
            f"; {stale_records} stale placement(s) before it, held by the barrier"
            if stale_records
            else ""
        )
        return BarrierDecision(
            "snapshot", f"grace over and no stale placement for {quiet_s:g} s{held}"
        )
    if now < grace_ends:
        why = f"producer refresh grace: {grace_ends - now:.0f} s left"
        wait = grace_ends - now
    elif not caught_up:
        why = f"checking {backlog} record(s) appended to the old partitions for stale placements"
        wait = 0.0
    elif last_stale_at is None:
        why = (
            f"watching the old partitions for stale placements for {quiet_s:g} s after the "
            f"expansion ({quiet_ends - now:.0f} s left, none so far)"
        )
        wait = quiet_ends - now
    else:
        why = (
            f"stale placements still arriving ({stale_records} so far, the last "
            f"{now - (last_stale_at or now):.0f} s ago): producers with old metadata write to "
            f"the old partitions; waiting for {quiet_s:g} s without one "
            f"({quiet_ends - now:.0f} s left)"
        )
        wait = quiet_ends - now
    if deadline is not None and now >= deadline:
        return BarrierDecision("timeout", f"barrier timeout reached while waiting: {why}")
    if deadline is not None:
        wait = min(wait, deadline - now)
    return BarrierDecision("wait", why, max(wait, 0.0))


@dataclass(frozen=True)
class OrderEvidence:
    """What the expansion record keeps in ``stale_placements`` (JSON via `to_dict`).

    ``scan_start``/``scan_positions``: the old partitions' end offsets at the expansion and the
    next offset the barrier's scan checks. ``before_snapshot``: stale placements the barrier
    saw (held by it); ``after_snapshot``: those the restarted job read beyond the barrier
    offsets (order at risk).
    """

    partitioner: tuple[str, ...] = ()
    scan_start: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    scan_positions: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    last_stale_at: str | None = None
    before_snapshot: StaleSummary = field(default_factory=StaleSummary)
    after_snapshot: StaleSummary = field(default_factory=StaleSummary)

    def with_scan(
        self, positions: Mapping[str, Mapping[int, int]], found: list[StalePlacement], at: str
    ) -> OrderEvidence:
        """After one barrier scan poll that read up to ``positions`` and found ``found``."""
        return replace(
            self,
            scan_positions={t: dict(ps) for t, ps in positions.items()},
            before_snapshot=self.before_snapshot.add(found),
            last_stale_at=at if found else self.last_stale_at,
        )

    def with_job_placements(self, summary: StaleSummary) -> OrderEvidence:
        return replace(self, after_snapshot=summary)

    def to_dict(self) -> dict[str, Any]:
        return {
            "partitioner": list(self.partitioner),
            "scan_start": _offsets_out(self.scan_start),
            "scan_positions": _offsets_out(self.scan_positions),
            "last_stale_at": self.last_stale_at,
            "before_snapshot": self.before_snapshot.to_dict(),
            "after_snapshot": self.after_snapshot.to_dict(),
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any] | None) -> OrderEvidence:
        """Inverse of `to_dict` ({} or None: nothing recorded yet); ValueError naming a field."""
        if not doc:
            return cls()
        try:
            return cls(
                partitioner=tuple(str(n) for n in doc.get("partitioner", ())),
                scan_start=_offsets_in(doc.get("scan_start", {})),
                scan_positions=_offsets_in(doc.get("scan_positions", {})),
                last_stale_at=doc.get("last_stale_at"),
                before_snapshot=StaleSummary.from_dict(doc.get("before_snapshot")),
                after_snapshot=StaleSummary.from_dict(doc.get("after_snapshot")),
            )
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"malformed stale_placements of an expansion record: {exc}") from None


def _offsets_out(offsets: Mapping[str, Mapping[int, int]]) -> dict[str, dict[str, int]]:
    return {t: {str(p): int(o) for p, o in sorted(ps.items())} for t, ps in sorted(offsets.items())}


def _offsets_in(doc: Mapping[str, Mapping[Any, Any]]) -> dict[str, dict[int, int]]:
    return {str(t): {int(p): int(o) for p, o in dict(ps).items()} for t, ps in dict(doc).items()}


# -- the report ----------------------------------------------------------------------------------


def order_proven(after: StaleSummary) -> bool:
    return after.records == 0


def order_line(before: StaleSummary, after: StaleSummary, *, examples: int = 3) -> str:
    """The report's verdict: ``order: proven (...)`` or ``order: at risk - n records of k keys
    (examples ...)``. Never silent: both counts are always named."""
    if order_proven(after):
        return (
            f"order: proven (0 stale placements after the snapshot; {before.records} before "
            "it, held by the barrier)"
        )
    shown = "; ".join(
        f"key {e.key!r} at {e.topic}[{e.partition}]@{e.offset}, belongs in "
        f"{e.topic}[{e.expected_partition}]"
        for e in after.examples[:examples]
    )
    return (
        f"order: at risk - {after.records} records of {after.key_count()} keys (examples "
        f"{shown}); {before.records} stale placements before the snapshot were held by the "
        "barrier"
    )


def order_report(before: StaleSummary, after: StaleSummary) -> dict[str, Any]:
    """The JSON form of the verdict (report.json, the report step's result)."""
    return {
        "order": "proven" if order_proven(after) else "at risk",
        "line": order_line(before, after),
        "stale_before_snapshot": before.records,
        "stale_after_snapshot": after.records,
        "keys_at_risk": [{"key": k, "records": n} for k, n in sorted(after.keys.items())],
        "keys_at_risk_truncated": after.keys_truncated,
        "examples": [e.to_dict() for e in after.examples],
    }


def check_on_stale_placement(value: str) -> str:
    """``warn`` or ``fail``; ValueError naming the choices otherwise."""
    if value not in ON_STALE_PLACEMENT:
        raise ValueError(
            f"on_stale_placement {value!r} is not understood - give 'warn' (count, log and "
            "report) or 'fail' (stop the job)"
        )
    return value


__all__ = [
    "DEFAULT_STALE_QUIET_S",
    "ON_STALE_PLACEMENT",
    "BarrierDecision",
    "OrderEvidence",
    "check_on_stale_placement",
    "decide_snapshot",
    "order_line",
    "order_proven",
    "order_report",
]
