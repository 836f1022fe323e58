"""The ordering barrier: snapshot barrier offsets, poll the job's progress.

A barrier is `{topic: {old partition: high watermark at snapshot time}}`. It holds once the job's
consumer group has committed, on every old partition, an offset `>=` the barrier offset (the
group commits the *next* offset to read, so every record below the barrier is processed). A
partition whose barrier offset is 0 (nothing was ever written) holds even without a commit.

One status poll is one `list_consumer_group_offsets` admin call for the whole barrier, so its
cost does not grow with how long the sensor waits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_samza_expand._kafka.admin import KafkaAdmin

Barrier = dict[str, dict[int, int]]


def snapshot_barrier(admin: KafkaAdmin, topic_old_counts: Mapping[str, int]) -> Barrier:
    """High watermarks of partitions `0 .. old-1` of each topic, in one admin call."""
    for topic, count in topic_old_counts.items():
        if isinstance(count, bool) or not isinstance(count, int) or count <= 0:
            raise ValueError(
                f"old partition count of topic {topic!r} must be a positive integer, got "
                f"{count!r} - pass the count from before the expansion"
            )
    highs = admin.high_watermarks({t: range(n) for t, n in topic_old_counts.items()})
    return {t: dict(sorted(highs[t].items())) for t in sorted(topic_old_counts)}


async def snapshot_barrier_async(admin: KafkaAdmin, topic_old_counts: Mapping[str, int]) -> Barrier:
    """`snapshot_barrier` off the event loop."""
    return await asyncio.to_thread(snapshot_barrier, admin, topic_old_counts)


def barrier_to_dict(barrier: Mapping[str, Mapping[int, int]]) -> dict[str, dict[str, int]]:
    """JSON-safe form (partition keys as strings), for XCom and expansion records."""
    return {t: {str(p): int(o) for p, o in sorted(ps.items())} for t, ps in sorted(barrier.items())}


def barrier_from_dict(doc: Mapping[str, Mapping[Any, Any]]) -> Barrier:
    """Inverse of `barrier_to_dict` (also accepts int keys); ValueError naming a bad entry."""
    if not isinstance(doc, Mapping):
        raise ValueError(
            f"barrier must be an object of topic -> {{partition: offset}}, got {doc!r}"
        )
    barrier: Barrier = {}
    for topic, partitions in doc.items():
        if not isinstance(topic, str) or not isinstance(partitions, Mapping):
            raise ValueError(f"barrier entry {topic!r}: expected topic -> {{partition: offset}}")
        barrier[topic] = {}
        for p, offset in partitions.items():
            try:
                partition = int(p)
            except (TypeError, ValueError):
                raise ValueError(
                    f"barrier of topic {topic!r}: partition {p!r} is not a number"
                ) from None
            if (
                isinstance(offset, bool)
                or not isinstance(offset, int)
                or offset < 0
                or partition < 0
            ):
                raise ValueError(
                    f"barrier of topic {topic!r} partition {p!r}: offset {offset!r} must be an "
                    "integer >= 0"
                )
            barrier[topic][partition] = offset
    return barrier


@dataclass(frozen=True)
class BarrierStatus:
    """How far the job's group is from the barrier; `holds` once no old partition lags."""

    group: str
    barrier: Barrier
    committed: dict[str, dict[int, int | None]]
    lag: dict[str, dict[int, int]]
    holds: bool
    total_lag: int

    def lagging(self) -> list[tuple[str, int, int]]:
        """(topic, partition, lag) of every partition still below its barrier offset."""
        return [(t, p, n) for t, ps in sorted(self.lag.items()) for p, n in sorted(ps.items()) if n]

    def describe(self, limit: int = 10) -> str:
        """One log line: overall state and the lag of the first `limit` lagging partitions."""
        if self.holds:
            return f"barrier holds for group {self.group!r}: every old partition is processed"
        parts = []
        for topic, partition, lag in self.lagging()[:limit]:
            committed = self.committed[topic][partition]
            parts.append(
                f"{topic}[{partition}] lag {lag} (committed "
                f"{'none' if committed is None else committed}, barrier "
                f"{self.barrier[topic][partition]})"
            )
        more = len(self.lagging()) - limit
        tail = f"; and {more} more" if more > 0 else ""
        return (
            f"waiting for group {self.group!r} to reach the barrier: total lag "
            f"{self.total_lag}; " + "; ".join(parts) + tail
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (partition keys as strings)."""
        return {
            "group": self.group,
            "barrier": barrier_to_dict(self.barrier),
            "committed": {
                t: {str(p): o for p, o in sorted(ps.items())}
                for t, ps in sorted(self.committed.items())
            },
            "lag": {
                t: {str(p): n for p, n in sorted(ps.items())} for t, ps in sorted(self.lag.items())
            },
            "holds": self.holds,
            "total_lag": self.total_lag,
        }


def compute_status(
    group: str, barrier: Mapping[str, Mapping[int, int]], committed: Mapping[str, Mapping[int, Any]]
) -> BarrierStatus:
    """Compare committed offsets with the barrier (pure; no broker)."""
    lag: dict[str, dict[int, int]] = {}
    seen: dict[str, dict[int, int | None]] = {}
    for topic, partitions in barrier.items():
        lag[topic], seen[topic] = {}, {}
        for partition, target in partitions.items():
            offset = committed.get(topic, {}).get(partition)
            seen[topic][partition] = offset
            lag[topic][partition] = max(0, target - (offset or 0))
    total = sum(n for ps in lag.values() for n in ps.values())
    return BarrierStatus(
        group=group,
        barrier={t: dict(ps) for t, ps in barrier.items()},
        committed=seen,
        lag=lag,
        holds=total == 0,
        total_lag=total,
    )


def barrier_status(
    admin: KafkaAdmin, group: str, barrier: Mapping[str, Mapping[int, int]]
) -> BarrierStatus:
    """Committed offsets of `group` against the barrier, in one admin call."""
    wanted = {t: sorted(ps) for t, ps in barrier.items() if ps}
    committed = admin.group_offsets(group, wanted) if wanted else {}
    return compute_status(group, barrier, committed)


async def barrier_status_async(
    admin: KafkaAdmin, group: str, barrier: Mapping[str, Mapping[int, int]]
) -> BarrierStatus:
    """`barrier_status` off the event loop (for triggers)."""
    return await asyncio.to_thread(barrier_status, admin, group, barrier)


__all__ = [
    "Barrier",
    "BarrierStatus",
    "barrier_from_dict",
    "barrier_status",
    "barrier_status_async",
    "barrier_to_dict",
    "compute_status",
    "snapshot_barrier",
    "snapshot_barrier_async",
]
