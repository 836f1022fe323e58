"""The read splits of a micro-batch of the provider's reader (`spark._source`): one Spark input
partition - one read task - per Kafka partition (SSP) of the job model with records in the batch
while the application has a core for each; with fewer cores than partitions, at most as many
splits as cores (`choose_cap`), so a grown topic is never read by more tasks than run at once
(each read task costs Spark about 0.1 s beyond its reading): the partitions grouped by task when
there are no more cores than tasks, else packed by record count. ``max_read_splits`` (> 0) is an
explicit cap that wins over the cores.

A split holds whole offset ranges: a partition is never divided, so its records are read in
offset order by one task (per-partition order within a batch is kept). Each range carries the
job model's task of its SSP (the ``task`` column, fixed tasks): a job that keeps state per task
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
    the batch's stale-placement rules, applied per range."""

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


def parse_max_splits(value: str | int | None, option: str = "max_read_splits") -> int:
    """A whole number >= 0 option (``max_read_splits``, ``read_cores``): 0 or absent: none."""
    try:
        cap = int(value or 0)
    except (TypeError, ValueError):
        cap = -1
    if cap < 0:
        what = (
            "the most read tasks a micro-batch may use, or 0 for one per Kafka partition"
            if option == "max_read_splits"
            else "the cores the application has for read tasks, or 0 for one per partition"
        )
        raise ValueError(f"{option} {value!r} is not a whole number >= 0 - give {what}")
    return cap


def choose_cap(max_splits: int = 0, cores: int = 0) -> tuple[int, str]:
    """The most read splits of a batch and why: ``max_splits`` when given (> 0, an explicit
    override), else the application's ``cores`` for read tasks (> 0), else no cap (0)."""
    if max_splits > 0:
        return max_splits, f"max_read_splits {max_splits}"
    if cores > 0:
        return cores, f"{cores} cores"
    return 0, "cores unknown"


def _span(tr: TaskRange) -> int:
    return tr[1][3] - tr[1][2]


def _by_ssp(tr: TaskRange) -> tuple[str, int]:
    return tr[1][0], tr[1][1]


def pack(ranges: Sequence[TaskRange], max_splits: int = 0) -> list[list[TaskRange]]:
    """Group a batch's ranges into read splits: one per range, or at most ``max_splits`` (> 0)
    splits. Under the cap, with no more splits than tasks a task's ranges stay together (one
    unit), else each range is a unit; units go largest first onto the lightest split by record
    count (ties by topic and partition, so the same batch packs the same way). Ranges of a split
    are sorted by (topic, partition); a range is never divided."""
    ordered = sorted(ranges, key=_by_ssp)
    if max_splits <= 0 or len(ordered) <= max_splits:
        return [[tr] for tr in ordered]
    tasks: dict[str, list[TaskRange]] = {}
    for tr in ordered:
        tasks.setdefault(tr[0], []).append(tr)
    units = list(tasks.values()) if len(tasks) >= max_splits else [[tr] for tr in ordered]
    bins: list[list[TaskRange]] = [[] for _ in range(max_splits)]
    loads = [0] * max_splits
    for unit in sorted(units, key=lambda u: (-sum(map(_span, u)), _by_ssp(u[0]))):
        lightest = min(range(max_splits), key=lambda i: (loads[i], i))
        bins[lightest].extend(unit)
        loads[lightest] += sum(map(_span, unit))
    return [sorted(b, key=_by_ssp) for b in bins if b]


def plan_choice(ranges: Sequence[TaskRange], max_splits: int = 0, cores: int = 0) -> str:
    """The plan's choice in words (the job's batch line): how many partitions, into how many
    splits and why - e.g. ``8 partitions grouped by task into 2 (2 cores)``."""
    cap, why = choose_cap(max_splits, cores)
    n, tasks = len(ranges), len({t for t, _r in ranges})
    if cap <= 0 or n <= cap:
        return f"{n} partitions, a read task each ({why})"
    how = "grouped by task" if tasks >= cap else "packed by records"
    return f"{n} partitions {how} into {cap} ({why})"


def make_splits(
    ranges: Sequence[TaskRange],
    max_splits: int = 0,
    rule: Any = None,
    before: Any = None,
    cores: int = 0,
) -> list[ReadSplit]:
    """`pack` the ranges into at most `choose_cap` `ReadSplit`s, each with the batch's
    stale-placement rules (an executor checks a range only where a rule's snapshot covers it,
    `StaleRule.checks`)."""
    cap, _why = choose_cap(max_splits, cores)
    return [
        ReadSplit([r for _t, r in group], [t for t, _r in group], rule, before)
        for group in pack(ranges, cap)
    ]


def read_cores_of(spark: Any) -> int:
    """The cores the application has for read tasks (`cores_for_reads` of its master, Spark's
    default parallelism and its settings); 0 when Spark cannot tell."""
    try:
        context = spark.sparkContext
        return cores_for_reads(
            str(context.master), int(context.defaultParallelism), dict(context.getConf().getAll())
        )
    except Exception:  # noqa: BLE001 - e.g. Spark Connect has no SparkContext: no cap
        return 0


def cores_for_reads(master: str, default_parallelism: int, conf: dict[str, str]) -> int:
    """The cores an application has for read tasks. On a local master, and with
    ``spark.default.parallelism`` set, Spark's default parallelism. On a cluster it counts only
    the executors registered so far, which at a query's start may be none (2): the cores the
    application asks for win when it names them - ``spark.cores.max`` (standalone), else
    ``spark.executor.instances`` x ``spark.executor.cores`` (YARN, Kubernetes), or the most
    executors of dynamic allocation x their cores."""
    registered = max(0, default_parallelism)
    if master.startswith("local") or conf.get("spark.default.parallelism"):
        return registered

    def whole(key: str) -> int:
        try:
            return max(0, int(str(conf.get(key, "0")).strip()))
        except ValueError:
            return 0

    asked = whole("spark.cores.max")
    if not asked:
        executors = (
            whole("spark.dynamicAllocation.maxExecutors")
            if conf.get("spark.dynamicAllocation.enabled", "").lower() == "true"
            else whole("spark.executor.instances")
        )
        asked = executors * (whole("spark.executor.cores") or 1)
    return max(registered, asked)


def write_plan_report(
    path: str | None, version: int, end: dict, splits: list[ReadSplit], choice: str = ""
) -> None:
    """The reader's own report of its newest planned batch (option ``plan_report``): job model
    version, end offsets, the plan's choice (`plan_choice`) and the splits' ranges - one read
    task each. Replaced atomically."""
    if not path:
        return
    doc = {
        "version": version,
        "end": end,
        "choice": choice,
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
    "choose_cap",
    "make_splits",
    "pack",
    "plan_choice",
    "parse_max_splits",
    "cores_for_reads",
    "read_cores_of",
    "read_plan_report",
    "write_plan_report",
]
