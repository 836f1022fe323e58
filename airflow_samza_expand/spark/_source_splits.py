"""The read splits of a micro-batch of the provider's reader (`spark._source`): one Spark input
partition - one read task - per Kafka partition (SSP) of the job model with records in the batch,
or, under a cap, the partitions packed into that many splits.

A split holds whole offset ranges: a partition is never divided, so its records are read in
offset order by one task (per-partition order within a batch is kept). Each range carries the
job model's task of its SSP (the ``task`` column, rule 1.3): a job that keeps state per task
groups by task after the read (`spark._state` sorts a group's rows by ``(topic, partition,
offset)``, whichever splits they came from). Growing a topic 2 -> 8 thus gives 8 read tasks,
while the tasks - and their state - stay 2.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from pyspark.sql.datasource import InputPartition

Range = tuple[str, int, int, int]  # topic, partition, start (inclusive), end (exclusive)
TaskRange = tuple[str, Range]  # the job model's task of the range's SSP, the range


class ReadSplit(InputPartition):
    """The offset ranges one read task reads in one micro-batch, each with its SSP's task, and
    the batch's stale-placement rules (rule 1.5), applied per range."""

    def __init__(
        self,
        ranges: Sequence[Range],
        tasks: Sequence[str],
        rule: Any = None,
        before: Any = None,
    ) -> None:
        if len(ranges) != len(tasks):
            raise ValueError(f"{len(ranges)} ranges but {len(tasks)} tasks")
        super().__init__(len(ranges))
        self.ranges = list(ranges)
        self.tasks = list(tasks)
        self.rule = rule  # the order check's rule beyond the snapshot, for this batch's model
        self.before = before  # the count before an expansion's snapshot (spark._stale_before)

    def __repr__(self) -> str:
        return f"ReadSplit({list(zip(self.tasks, self.ranges, strict=True))!r})"


def parse_max_splits(value: str | int | None) -> int:
    """The ``max_read_splits`` option: 0 (or absent) means one split per partition."""
    try:
        cap = int(value or 0)
    except (TypeError, ValueError):
        cap = -1
    if cap < 0:
        raise ValueError(
            f"max_read_splits {value!r} is not a whole number >= 0 - give the most read tasks "
            "a micro-batch may use, or 0 for one per Kafka partition"
        )
    return cap


def pack(ranges: Sequence[TaskRange], max_splits: int = 0) -> list[list[TaskRange]]:
    """Group a batch's ranges into read splits: one per range, or at most ``max_splits``
    (> 0) splits balanced by record count (largest range first onto the lightest split; ties by
    topic and partition, so the same batch packs the same way). Ranges of a split are sorted
    by (topic, partition); a range is never divided."""
    ordered = sorted(ranges, key=lambda tr: (tr[1][0], tr[1][1]))
    if max_splits <= 0 or len(ordered) <= max_splits:
        return [[tr] for tr in ordered]
    bins: list[list[TaskRange]] = [[] for _ in range(max_splits)]
    loads = [0] * max_splits
    for tr in sorted(ordered, key=lambda tr: (-(tr[1][3] - tr[1][2]), tr[1][0], tr[1][1])):
        lightest = min(range(max_splits), key=lambda i: (loads[i], i))
        bins[lightest].append(tr)
        loads[lightest] += tr[1][3] - tr[1][2]
    return [sorted(b, key=lambda tr: (tr[1][0], tr[1][1])) for b in bins if b]


def make_splits(
    ranges: Sequence[TaskRange], max_splits: int = 0, rule: Any = None, before: Any = None
) -> list[ReadSplit]:
    """`pack` the ranges into `ReadSplit`s, each with the batch's stale-placement rules (an
    executor checks a range only where a rule's snapshot covers it, `StaleRule.checks`)."""
    return [
        ReadSplit([r for _t, r in group], [t for t, _r in group], rule, before)
        for group in pack(ranges, max_splits)
    ]


def write_plan_report(path: str | None, version: int, end: dict, splits: list[ReadSplit]) -> None:
    """The reader's own report of its newest planned batch (option ``plan_report``): job model
    version, end offsets, and the splits' ranges - one read task each. Replaced atomically."""
    if not path:
        return
    doc = {
        "version": version,
        "end": end,
        "read_tasks": len(splits),
        "splits": [[[t, *r] for t, r in zip(s.tasks, s.ranges, strict=True)] for s in splits],
    }
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(doc, handle, sort_keys=True)
    os.replace(tmp, path)


def read_plan_report(path: str) -> dict | None:
    """The newest plan report at ``path``; None when there is none (yet)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


__all__ = [
    "Range",
    "ReadSplit",
    "TaskRange",
    "make_splits",
    "pack",
    "parse_max_splits",
    "read_plan_report",
    "write_plan_report",
]
