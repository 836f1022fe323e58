"""Where an expansion stands when one of its steps has failed, and what an operator does next
(pure: the facts come from the coordinator store and Kafka, gathered by
``_protocol.recovery``).

A failure after the topic has grown leaves a consistent but unfinished state: the running job
still reads only vN's partitions (the new ones wait, nothing is lost), a vN+1 standby may be
running and waiting, and vN+1 may or may not be written. Every step finds its own work done on a
rerun, so the fix is always the same: remove the cause, then clear the failed task.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from airflow_samza_expand.core._liveness import ProcessorStatus


@dataclass(frozen=True)
class FailureState:
    """The facts about one expansion at the moment a step failed."""

    expansion_id: str
    step: str
    error: str
    counts_before: Mapping[str, int]
    counts_after: Mapping[str, int]
    live_counts: Mapping[str, int]
    base_version: int
    target_version: int
    latest_version: int | None
    processors: tuple[ProcessorStatus, ...] = field(default_factory=tuple)

    def planned(self) -> dict[str, tuple[int, int]]:
        """Stream -> (before, planned) for the streams the expansion grows."""
        return {
            s: (n, int(self.counts_after[s]))
            for s, n in sorted(self.counts_before.items())
            if self.counts_after.get(s, n) != n
        }

    def grown(self) -> dict[str, tuple[int, int]]:
        """Stream -> (before, live) for the planned streams whose live count grew."""
        live = {s: (n, int(self.live_counts.get(s, n))) for s, (n, _) in self.planned().items()}
        return {s: (n, m) for s, (n, m) in live.items() if m > n}


def describe_failure(state: FailureState, now: datetime | None = None) -> list[str]:
    """Log lines: what state things are in (grown, vN+1 written, who runs which version) and
    what to do."""
    lines = [f"expansion {state.expansion_id}: step {state.step!r} failed: {state.error}"]
    grown = state.grown()
    planned = state.planned()
    if grown:
        lines.append(
            "  topic: grown "
            + ", ".join(f"{s} {before} -> {live}" for s, (before, live) in grown.items())
        )
    else:
        lines.append(
            "  topic: not grown yet ("
            + ", ".join(f"{s} {b}, planned {a}" for s, (b, a) in planned.items())
            + "): nothing has changed for the job"
        )
    written = state.latest_version is not None and state.latest_version >= state.target_version
    lines.append(
        f"  job model: v{state.target_version} written"
        if written
        else f"  job model: v{state.latest_version} in force (v{state.target_version} not written)"
    )
    live = [p for p in state.processors if p.alive(now) and p.state not in ("stopped", "failed")]
    on_new = [p for p in live if p.job_model_version == state.target_version]
    on_old = [p for p in live if p.job_model_version != state.target_version]
    if live:
        lines += [f"  processor: {p.describe(now)}" for p in live]
    else:
        lines.append("  processors: none alive (the job is not running)")
    if grown and on_old and not written:
        moved = ", ".join(
            f"{s} partitions {list(range(before, live_n))}" for s, (before, live_n) in grown.items()
        )
        lines.append(
            f"  the job still runs v{state.base_version}: it reads the old partitions only; "
            f"records in {moved} wait there (nothing is lost, moved keys are delayed)"
        )
    if any(p.role == "standby" for p in on_new):
        lines.append(
            f"  a v{state.target_version} standby is running and waiting: it takes over when "
            "the expansion goes on (leave it running)"
        )
    lines.append(
        "  what to do: fix the cause above, then clear the failed task "
        f"({state.step!r}, with its downstream tasks): every step finds what it already did and "
        "does not repeat it; never shrink the topic back"
        + (
            ""
            if grown
            else "; or leave the expansion: nothing was grown (release the lease by clearing "
            "or let it expire)"
        )
    )
    return lines


__all__ = ["FailureState", "describe_failure"]
