"""Samza's SSP groupers, with SEP-5's fixed-task variants that survive partition expansion.

Every grouper has ``group(ssps, previous_mapping=None) -> {task name: frozenset of SSPs}``.
``previous_mapping`` is the SSP -> task mapping of the previous job model. Broadcast SSPs are
given to the constructor and go to every task. Task names are spelled like Samza's:

* `GroupByPartition`: ``"Partition 3"`` holds partition 3 of every stream.
* `GroupBySystemStreamPartition`: ``"SystemStreamPartition [kafka, orders, 3]"``, one SSP each.
* `AllSspToSingleTaskGrouper`: ``"Task-0"`` holds every SSP.

The plain groupers ignore ``previous_mapping`` (Samza before SEP-5: an expanded stream's new
partitions get new tasks, so keys leave the task that holds their state). The ``FixedTasks``
groupers follow Samza's ``SSPGrouperProxy``: an SSP of a previous mapping keeps its task; a
partition ``p`` of a stream whose count grew goes to the task that owned
``algorithm.partition_before_expansion(p, current, initial)``; a new stream gets the base
grouper's answer; a removed stream disappears; tasks left empty are dropped. With no previous
mapping, or one that the base grouper itself produced and no count changed, they return exactly
the base grouper's answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import ClassVar, Protocol

from airflow_samza_expand.core._ssp import SystemStreamPartition
from airflow_samza_expand.core.errors import (
    ExpansionError,
    InvalidGrowthError,
    InvalidJobModelError,
)
from airflow_samza_expand.core.expansion import (
    DefaultPartitionExpansionAlgorithm,
    PartitionExpansionAlgorithm,
)

SSP = SystemStreamPartition
Groups = dict[str, frozenset[SystemStreamPartition]]
PreviousMapping = Mapping[SystemStreamPartition, str]
StreamKey = tuple[str, str]


class SystemStreamPartitionGrouper(Protocol):
    """What every grouper offers."""

    name: ClassVar[str]

    def group(
        self, ssps: Iterable[SystemStreamPartition], previous_mapping: PreviousMapping | None = None
    ) -> Groups: ...


def _by_stream(
    ssps: Iterable[SystemStreamPartition], broadcast: frozenset[SystemStreamPartition]
) -> dict[StreamKey, list[SystemStreamPartition]]:
    """Regular (non-broadcast) SSPs per (system, stream), refusing duplicates and bad items."""
    streams: dict[StreamKey, list[SystemStreamPartition]] = {}
    count = 0
    for ssp in ssps:
        count += 1
        if not isinstance(ssp, SystemStreamPartition):
            raise InvalidJobModelError(f"grouper input must be SystemStreamPartitions, got {ssp!r}")
        if ssp.partition < 0:
            raise InvalidJobModelError(f"SSP {ssp} has a negative partition number")
        if broadcast and ssp in broadcast:
            continue
        key = (ssp.system, ssp.stream)
        bucket = streams.get(key)
        if bucket is None:
            streams[key] = [ssp]
        else:
            bucket.append(ssp)
    for (system, stream), items in streams.items():
        partitions = {s.partition for s in items}
        if len(partitions) != len(items):
            dup = _first_duplicate(s.partition for s in items)
            raise InvalidJobModelError(
                f"duplicate SSP [{system}, {stream}, {dup}] in the grouper input: list each "
                "partition of a stream once"
            )
    if count == 0:
        raise InvalidJobModelError("no input SSPs to group: give the job at least one input stream")
    if not streams:
        raise InvalidJobModelError(
            "every input SSP is broadcast: a job needs at least one non-broadcast input stream"
        )
    return streams


def _first_duplicate(values: Iterable[int]) -> int:
    seen: set[int] = set()
    for v in values:
        if v in seen:
            return v
        seen.add(v)
    raise AssertionError("no duplicate")


def _contiguous_count(key: StreamKey, partitions: Iterable[int], what: str) -> int:
    """Partition count of a stream whose partitions must be exactly 0..n-1."""
    present = set(partitions)
    n = len(present)
    highest = max(present)
    if highest != n - 1 or min(present) != 0:
        missing = sorted(set(range(highest + 1)) - present)[:10]
        raise InvalidJobModelError(
            f"{what} names partition {highest} of stream '{key[1]}' ({key[0]}), beyond the "
            f"stream's partition count {n} (partitions {missing} are missing) - list every "
            "partition 0..count-1 of the stream exactly once"
        )
    return n


def _collect(
    named: Iterable[tuple[list[SystemStreamPartition], list[str]]],
) -> dict[str, list[SystemStreamPartition]]:
    """Group SSPs by task name, from (SSPs, their task names) pairs."""
    groups: dict[str, list[SystemStreamPartition]] = {}
    get = groups.get
    for items, names in named:
        for ssp, task in zip(items, names, strict=True):
            bucket = get(task)
            if bucket is None:
                groups[task] = [ssp]
            else:
                bucket.append(ssp)
    return groups


class _Grouper:
    """Base of the groupers: input checks, broadcast SSPs, and one task-name rule per SSP."""

    name: ClassVar[str] = ""
    keeps_state_on_expansion: ClassVar[bool] = False

    def __init__(self, broadcast_ssps: Iterable[SystemStreamPartition] = ()) -> None:
        self.broadcast_ssps = frozenset(broadcast_ssps)

    def group(
        self, ssps: Iterable[SystemStreamPartition], previous_mapping: PreviousMapping | None = None
    ) -> Groups:
        """Group ``ssps`` by this grouper's rule; ``previous_mapping`` is ignored."""
        streams = _by_stream(ssps, self.broadcast_ssps)
        return self._finish(
            _collect((items, self._task_names(items)) for items in streams.values())
        )

    def _task_names(self, items: list[SystemStreamPartition]) -> list[str]:
        """The base rule: the task name of each SSP of one stream."""
        raise NotImplementedError

    def _finish(self, groups: Mapping[str, list[SystemStreamPartition]]) -> Groups:
        broadcast = self.broadcast_ssps
        return {
            task: frozenset(members).union(broadcast) if broadcast else frozenset(members)
            for task, members in sorted(groups.items())
            if members
        }

    def __repr__(self) -> str:
        extra = f"broadcast_ssps={len(self.broadcast_ssps)}" if self.broadcast_ssps else ""
        return f"{type(self).__name__}({extra})"


class GroupByPartition(_Grouper):
    """Task ``"Partition p"`` reads partition ``p`` of every stream (Samza's default)."""

    name = "GroupByPartition"

    def _task_names(self, items: list[SystemStreamPartition]) -> list[str]:
        return [f"Partition {ssp.partition}" for ssp in items]


def ssp_task_name(ssp: SystemStreamPartition) -> str:
    """Samza's ``SystemStreamPartition.toString()``: GroupBySystemStreamPartition's task name."""
    return f"SystemStreamPartition [{ssp.system}, {ssp.stream}, {ssp.partition}]"


class GroupBySystemStreamPartition(_Grouper):
    """One task per SSP, named ``"SystemStreamPartition [system, stream, p]"``."""

    name = "GroupBySystemStreamPartition"

    def _task_names(self, items: list[SystemStreamPartition]) -> list[str]:
        return [ssp_task_name(ssp) for ssp in items]


class AllSspToSingleTaskGrouper(_Grouper):
    """Every SSP in one task ``"Task-<processor id>"`` (Samza: ``Task-%s``), ``"Task-0"`` here.

    Expansion never moves a key out of the only task, so it keeps state across expansion.
    """

    name = "AllSspToSingleTaskGrouper"
    keeps_state_on_expansion = True

    def __init__(
        self, broadcast_ssps: Iterable[SystemStreamPartition] = (), *, processor_id: str = "0"
    ) -> None:
        super().__init__(broadcast_ssps)
        self.processor_id = processor_id

    def _task_names(self, items: list[SystemStreamPartition]) -> list[str]:
        return [f"Task-{self.processor_id}"] * len(items)


class _FixedTasks(_Grouper):
    """SEP-5: the base grouper's answer, with SSPs of earlier job models kept in their task and
    new partitions of grown streams put in the task of their keys' partition."""

    base: ClassVar[type[_Grouper]]
    keeps_state_on_expansion = True

    def __init__(
        self,
        broadcast_ssps: Iterable[SystemStreamPartition] = (),
        *,
        algorithm: PartitionExpansionAlgorithm | None = None,
        initial_counts: Mapping[str, int] | Mapping[StreamKey, int] | None = None,
    ) -> None:
        """``initial_counts``: stream (or (system, stream)) -> count when the job first ran;
        a stream without one uses its previous count (Samza's step-by-step rule)."""
        super().__init__(broadcast_ssps)
        self.algorithm = algorithm or DefaultPartitionExpansionAlgorithm()
        self.initial_counts = dict(initial_counts or {})
        self._base = self.base(self.broadcast_ssps)

    def _task_names(self, items: list[SystemStreamPartition]) -> list[str]:
        return self._base._task_names(items)

    def group(
        self, ssps: Iterable[SystemStreamPartition], previous_mapping: PreviousMapping | None = None
    ) -> Groups:
        streams = _by_stream(ssps, self.broadcast_ssps)
        if not previous_mapping:
            return self._finish(
                _collect((items, self._task_names(items)) for items in streams.values())
            )
        previous = self._previous_by_stream(previous_mapping)
        named = []
        for key, items in streams.items():
            previous_tasks = previous.get(key)
            if previous_tasks is None:  # a new stream: the base grouper's answer
                named.append((items, self._task_names(items)))
                continue
            current = _contiguous_count(key, (s.partition for s in items), "the grouper input")
            named.append((items, self._tasks_of(key, current, previous_tasks, items)))
        return self._finish(_collect(named))

    def _previous_by_stream(self, previous_mapping: PreviousMapping) -> dict[StreamKey, list[str]]:
        """Previous task of each partition, per stream, as a list indexed by partition."""
        by_stream: dict[StreamKey, dict[int, str]] = {}
        broadcast = self.broadcast_ssps
        for ssp, task in previous_mapping.items():
            if not isinstance(ssp, SystemStreamPartition) or not isinstance(task, str):
                raise InvalidJobModelError(
                    f"previous mapping must map SystemStreamPartition -> task name, got "
                    f"{ssp!r} -> {task!r}"
                )
            if broadcast and ssp in broadcast:
                continue
            by_stream.setdefault((ssp.system, ssp.stream), {})[ssp.partition] = task
        result: dict[StreamKey, list[str]] = {}
        for key, tasks in by_stream.items():
            n = _contiguous_count(key, tasks, "the previous mapping")
            result[key] = [tasks[p] for p in range(n)]
        return result

    def _initial_count(self, key: StreamKey, previous_count: int) -> int:
        counts: Mapping = self.initial_counts
        initial = counts.get(key, counts.get(key[1]))
        if initial is None:
            return previous_count
        if initial <= 0 or previous_count % initial:
            raise InvalidGrowthError(
                f"stream '{key[1]}': previous count {previous_count} is not a multiple of its "
                f"initial count {initial} - fix the initial count in the job model"
            )
        return initial

    def _tasks_of(
        self,
        key: StreamKey,
        current: int,
        previous_tasks: list[str],
        items: list[SystemStreamPartition],
    ) -> list[str]:
        """Task of each SSP of one stream that was in the previous mapping."""
        previous = len(previous_tasks)
        stream = key[1]
        if current == previous:
            return [previous_tasks[s.partition] for s in items]
        if current < previous:
            raise InvalidGrowthError(
                f"stream '{stream}' shrank from {previous} to {current} partitions: partitions "
                f"cannot be removed without losing state - restore {previous} partitions or more"
            )
        if current % previous:
            raise InvalidGrowthError(
                f"stream '{stream}' grew from {previous} to {current} partitions, not a multiple "
                f"of {previous}: keys would leave their task - grow to {previous * 2} or "
                f"another multiple of {previous}"
            )
        initial = self._initial_count(key, previous)
        algorithm = self.algorithm
        if type(algorithm) is DefaultPartitionExpansionAlgorithm:
            algorithm.partition_before_expansion(0, current, initial)  # validates the counts
            return [previous_tasks[s.partition % initial] for s in items]
        tasks = []
        for ssp in items:
            q = algorithm.partition_before_expansion(ssp.partition, current, initial)
            if isinstance(q, bool) or not isinstance(q, int) or not 0 <= q < initial:
                raise ExpansionError(
                    f"expansion algorithm {algorithm!r} mapped partition {ssp.partition} of "
                    f"stream '{stream}' ({initial} -> {current} partitions) to {q!r}, outside "
                    f"0..{initial - 1} - fix the algorithm's partition_before_expansion"
                )
            tasks.append(previous_tasks[q])
        return tasks


class GroupByPartitionFixedTasks(_FixedTasks):
    """`GroupByPartition` whose tasks stay fixed when input streams expand (SEP-5)."""

    name = "GroupByPartitionFixedTasks"
    base = GroupByPartition


class GroupBySystemStreamPartitionFixedTasks(_FixedTasks):
    """`GroupBySystemStreamPartition` whose tasks stay fixed when input streams expand."""

    name = "GroupBySystemStreamPartitionFixedTasks"
    base = GroupBySystemStreamPartition


GROUPERS: dict[str, type[_Grouper]] = {
    cls.name: cls
    for cls in (
        GroupByPartition,
        GroupBySystemStreamPartition,
        AllSspToSingleTaskGrouper,
        GroupByPartitionFixedTasks,
        GroupBySystemStreamPartitionFixedTasks,
    )
}

# Samza's factory class names for the same rules.
_SAMZA_FACTORIES = {
    "org.apache.samza.container.grouper.stream.GroupByPartitionFactory": "GroupByPartition",
    "org.apache.samza.container.grouper.stream.GroupBySystemStreamPartitionFactory": (
        "GroupBySystemStreamPartition"
    ),
    "org.apache.samza.container.grouper.stream.AllSspToSingleTaskGrouperFactory": (
        "AllSspToSingleTaskGrouper"
    ),
}


def grouper_by_name(
    name: str,
    *,
    broadcast_ssps: Iterable[SystemStreamPartition] = (),
    algorithm: PartitionExpansionAlgorithm | None = None,
    initial_counts: Mapping[str, int] | None = None,
) -> _Grouper:
    """The grouper a job model's ``grouper`` string names (also Samza factory class names).

    ``algorithm`` and ``initial_counts`` apply to the FixedTasks groupers only.
    """
    cls = GROUPERS.get(_SAMZA_FACTORIES.get(name, name))
    if cls is None:
        raise ExpansionError(f"unknown grouper {name!r} - use one of: {', '.join(GROUPERS)}")
    if issubclass(cls, _FixedTasks):
        return cls(broadcast_ssps, algorithm=algorithm, initial_counts=initial_counts)
    return cls(broadcast_ssps)


__all__ = [
    "GROUPERS",
    "AllSspToSingleTaskGrouper",
    "GroupByPartition",
    "GroupByPartitionFixedTasks",
    "GroupBySystemStreamPartition",
    "GroupBySystemStreamPartitionFixedTasks",
    "SystemStreamPartitionGrouper",
    "grouper_by_name",
    "ssp_task_name",
]
