"""The proof of order (docs/design.md 'Stale placements') where the records are read anyway: stale
placements counted in the job's micro-batches.

The provider's reader (`spark._source`) reads every record of the old partitions; with an order
check on, each batch's task partitions carry the `StaleRule` of the expansion that made the job
model (its barrier snapshot ``H``, old and new counts, the detected partitioner). An executor
counts, per range it read, the stale placements at offsets ``>= H`` (`count_stale`, vectorised:
each distinct key of the range is hashed once, the result mapped back to the rows with numpy)
and writes the range's summary to a report file in the rule's directory (`write_report`). After
each committed batch the driver's `spark._stale.OrderCheck` takes the reports that chain from its
positions (`take_reports`) and re-reads (`_protocol.barrier.stale_scan`) only what no report covers:
Spark's own Kafka source, or executors that cannot write to the driver's directory (a cluster
without a shared filesystem).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from airflow_samza_expand.core._stale import (
    MAX_EXAMPLES,
    MAX_KEYS_KEPT,
    StalePlacement,
    StaleSummary,
)

Offsets = dict[str, dict[int, int]]


@dataclass(frozen=True)
class StaleRule:
    """What an executor needs to count stale placements of job model ``version``."""

    version: int
    report_dir: str
    check_from: Mapping[str, Mapping[int, int]]  # barrier snapshot H of every old partition
    new_counts: Mapping[str, int]
    partitioners: tuple[str, ...] | None = None  # None: stale only if neither default places it

    def checks(self, topic: str, partition: int, end: int) -> int | None:
        """The first offset to check of a range of ``topic[partition]`` ending at ``end``
        (exclusive): H of an old partition the range passes, else None."""
        start = self.check_from.get(topic, {}).get(partition)
        return start if start is not None and end > start else None

    def directory(self) -> str:
        return os.path.join(self.report_dir, f"v{self.version}")

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": self.version,
                "report_dir": self.report_dir,
                "check_from": {
                    t: {str(p): int(o) for p, o in ps.items()} for t, ps in self.check_from.items()
                },
                "new_counts": dict(self.new_counts),
                "partitioners": list(self.partitioners) if self.partitioners else None,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str | None) -> StaleRule | None:
        if not text:
            return None
        doc = json.loads(text)
        return cls(
            version=int(doc["version"]),
            report_dir=str(doc["report_dir"]),
            check_from={
                t: {int(p): int(o) for p, o in ps.items()} for t, ps in doc["check_from"].items()
            },
            new_counts={t: int(n) for t, n in doc["new_counts"].items()},
            partitioners=tuple(doc["partitioners"]) if doc.get("partitioners") else None,
        )


def _targets(rule: StaleRule, topic: str, partition: int, keys: Sequence[Any]) -> np.ndarray:
    """Per candidate partitioner, each distinct key's partition at the new count (a key
    without bytes gets ``partition``: never stale). Shape (candidates, len(keys))."""
    from airflow_samza_expand._protocol.barrier.stale_scan import resolve_partitioners

    count = int(rule.new_counts[topic])
    rows = [
        [f(k, count) if k else partition for k in keys]
        for f in resolve_partitioners(rule.partitioners)
    ]
    return np.asarray(rows, dtype=np.int64).reshape(len(rows), len(keys))


def count_stale(
    rule: StaleRule,
    topic: str,
    partition: int,
    offsets: Sequence[int] | np.ndarray,
    keys: Sequence[bytes | None],
) -> StaleSummary:
    """The stale placements among the records ``(offsets[i], keys[i])`` of ``topic[partition]``
    read by the job (beyond the snapshot: offsets ``>= H``, raw key bytes)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    start = rule.checks(topic, partition, 1 << 62)
    if start is None or not len(offsets):
        return StaleSummary()
    at = np.asarray(offsets, dtype=np.int64)
    keep = at >= start
    if not keep.any():
        return StaleSummary()
    column = pa.array(keys, type=pa.binary())
    if not keep.all():
        column, at = column.filter(pa.array(keep)), at[keep]
    encoded = column.dictionary_encode()
    distinct = encoded.dictionary.to_pylist()
    # a null key gets the extra last slot, whose target is its own partition (never stale)
    codes = pc.fill_null(encoded.indices, len(distinct)).to_numpy(zero_copy_only=False)
    targets = _targets(rule, topic, partition, [*distinct, None])
    stale = (targets[:, codes] != partition).all(axis=0)
    if not stale.any():
        return StaleSummary()
    return _summary(topic, partition, at[stale], codes[stale], distinct, targets[0])


def _summary(
    topic: str,
    partition: int,
    offsets: np.ndarray,
    codes: np.ndarray,
    distinct: list[bytes],
    expected: np.ndarray,
) -> StaleSummary:
    """A summary of the stale rows (their offsets and distinct-key codes)."""
    per_key = np.bincount(codes, minlength=len(distinct))
    seen = np.flatnonzero(per_key)
    keys = {distinct[i].decode("utf-8", "replace"): int(per_key[i]) for i in seen[:MAX_KEYS_KEPT]}
    examples = tuple(
        StalePlacement(
            topic,
            partition,
            int(offsets[i]),
            distinct[codes[i]].decode("utf-8", "replace"),
            int(expected[codes[i]]),
        )
        for i in range(min(MAX_EXAMPLES, len(offsets)))
    )
    return StaleSummary(
        records=len(offsets),
        keys=keys,
        keys_truncated=len(seen) > MAX_KEYS_KEPT,
        examples=examples,
        last_offset={topic: {partition: int(offsets.max())}},
    )


def report_name(topic: str, partition: int, begin: int, end: int) -> str:
    return f"{topic}@{partition}@{begin}@{end}.json"


def write_report(
    rule: StaleRule, topic: str, partition: int, begin: int, end: int, summary: StaleSummary
) -> bool:
    """Record that ``[begin, end)`` of ``topic[partition]`` was checked, with its counts
    (atomic; a replayed range writes the same file). False when the directory is not
    writable here: the driver's check scans that range itself."""
    directory = rule.directory()
    path = os.path.join(directory, report_name(topic, partition, begin, end))
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    try:
        os.makedirs(directory, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(summary.to_dict(), handle, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        return False
    return True


def take_reports(
    rule: StaleRule,
    positions: Mapping[str, Mapping[int, int]],
    until: Mapping[str, Mapping[int, int]],
) -> tuple[StaleSummary, Offsets, int]:
    """Driver side: the summaries of the reports that chain from ``positions`` up to at most
    ``until`` (consumed: deleted), the positions they reach and the records they covered."""
    directory = rule.directory()
    try:
        names = os.listdir(directory)
    except OSError:
        names = []
    found: dict[tuple[str, int, int], tuple[int, str]] = {}
    for name in names:
        parts = name[: -len(".json")].split("@") if name.endswith(".json") else []
        if len(parts) == 4:
            topic, partition, begin, end = parts[0], int(parts[1]), int(parts[2]), int(parts[3])
            found[(topic, partition, begin)] = (end, os.path.join(directory, name))
    total = StaleSummary()
    covered = 0
    reached = {t: dict(ps) for t, ps in positions.items()}
    for topic, partitions in reached.items():
        for partition in partitions:
            stop = int(until[topic][partition])
            while (hit := found.get((topic, partition, partitions[partition]))) is not None:
                end, path = hit
                if end > stop:
                    break
                with open(path, encoding="utf-8") as handle:
                    total = total.merge(StaleSummary.from_dict(json.load(handle)))
                os.remove(path)
                covered += end - partitions[partition]
                partitions[partition] = end
    return total, reached, covered


def committed_until(
    positions: Mapping[str, Mapping[int, int]], end: Mapping[str, Mapping[Any, int]]
) -> Offsets:
    """Where a check of ``positions`` may go after a committed batch: the batch's end offsets
    (partition keys as ints or strings, as Spark's progress has them), never backwards."""
    return {
        t: {p: max(o, _offset_at(end, t, p, o)) for p, o in ps.items()}
        for t, ps in positions.items()
    }


def _offset_at(
    offsets: Mapping[str, Mapping[Any, int]], topic: str, partition: int, default: int
) -> int:
    partitions = offsets.get(topic) or {}
    value = partitions.get(str(partition), partitions.get(partition))  # type: ignore[call-overload]
    return default if value is None else int(value)


@dataclass(frozen=True)
class RangeCount:
    """What checking ``[positions, until)`` found (`count_range`)."""

    counted: StaleSummary  # in the reports of the job's batches
    found: tuple[StalePlacement, ...]  # by the re-read of what no report covered
    reached: Offsets
    covered: int  # records the reports covered
    rescanned: int  # records re-read


def count_range(
    rule: StaleRule | None,
    positions: Mapping[str, Mapping[int, int]],
    until: Mapping[str, Mapping[int, int]],
    scanner: Callable[[], Any],
) -> RangeCount:
    """Driver side, after a committed batch: take the reports that chain from ``positions``
    (`take_reports`; none without ``rule``), then re-read (`_protocol.barrier.stale_scan`, with the
    ``scanner()`` it returns) only what they did not cover, up to ``until``."""
    if rule is None:
        counted, reached, covered = StaleSummary(), {t: dict(ps) for t, ps in positions.items()}, 0
    else:
        counted, reached, covered = take_reports(rule, positions, until)
    if reached == until:
        return RangeCount(counted, (), reached, covered, 0)
    from airflow_samza_expand._protocol.barrier.stale_scan import scan_until_caught_up

    result = scan_until_caught_up(scanner(), reached, until=until)
    rescanned = sum(result.positions[t][p] - o for t, ps in reached.items() for p, o in ps.items())
    return RangeCount(counted, tuple(result.placements), result.positions, covered, rescanned)


class RuleFile:
    """The count before a snapshot, reader side: the rule the driver publishes in a file
    (`spark._stale_before`; empty or absent: none), read only when the file was replaced."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.seen: tuple[int, int] | None = None  # (inode, mtime) of the content last read
        self.rule: StaleRule | None = None

    def poll(self) -> StaleRule | None:
        """The rule in force now (None: nothing to count)."""
        if not self.path:
            return None
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            self.seen, self.rule = None, None
            return None
        if (stat.st_ino, stat.st_mtime_ns) != self.seen:
            self.seen = (stat.st_ino, stat.st_mtime_ns)
            with open(self.path, encoding="utf-8") as handle:
                self.rule = StaleRule.from_json(handle.read().strip() or None)
        return self.rule


__all__ = [
    "RangeCount",
    "RuleFile",
    "StaleRule",
    "committed_until",
    "count_range",
    "count_stale",
    "report_name",
    "take_reports",
    "write_report",
]
