"""Rules every stored job model obeys (docs/design.md 'Fixed tasks'): checked on write and on read.

* `check_fixed_tasks`: with a FixedTasks grouper, partition ``p`` of a stream is in the task
  of partition ``algorithm.partition_before_expansion(p, current, initial)`` (``p % initial``
  for the default algorithm). A model that breaks it would move keys away from their state.
* `check_next_version`: version ``N+1`` follows ``N``; a version that skips one is refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice

from airflow_samza_expand.core.errors import ExpansionError, InvalidJobModelError
from airflow_samza_expand.core.expansion import (
    DEFAULT_ALGORITHM_PATH,
    PartitionExpansionAlgorithm,
    load_expansion_algorithm,
)
from airflow_samza_expand.core.groupers import GROUPERS, grouper_by_name
from airflow_samza_expand.core.model import JobModel, SystemStreamPartition

MAX_LISTED_BREAKS = 10  # the refusal lists this many offending SSPs, over all streams


def keeps_tasks_fixed(grouper: str) -> bool:
    """True for the FixedTasks groupers (also under Samza factory names)."""
    try:
        cls = type(grouper_by_name(grouper))
    except ExpansionError:  # an unknown grouper is not ours to judge here
        return False
    return cls in GROUPERS.values() and bool(getattr(cls, "keeps_state_on_expansion", False))


def check_fixed_tasks(model: JobModel, *, need_algorithm: bool = True) -> None:
    """InvalidJobModelError naming the offending SSPs and the fix when `model` breaks fixed tasks.

    A custom expansion algorithm is loaded from its dotted path; when it cannot be loaded,
    `need_algorithm=False` (a reader, e.g. the Spark job on a host without the plugin) skips
    the check instead of failing (a writer always needs it).
    """
    if not keeps_tasks_fixed(model.grouper):
        return
    algorithm = None
    if model.expansion_algorithm != DEFAULT_ALGORITHM_PATH:
        try:
            algorithm = load_expansion_algorithm(model.expansion_algorithm)
        except ExpansionError:
            if need_algorithm:
                raise
            return
    offending = list(islice(_fixed_task_breaks(model, algorithm), MAX_LISTED_BREAKS))
    if offending:
        raise InvalidJobModelError(
            f"job model v{model.version} of job {model.job_name!r} breaks the fixed tasks of "
            f"grouper {model.grouper} (partition p belongs to the task of p % initial count): "
            f"{'; '.join(offending)} - rebuild the mapping with plan_expansion from the previous "
            "version (or move each listed SSP to the task named in parentheses)"
        )


def _fixed_task_breaks(
    model: JobModel, algorithm: PartitionExpansionAlgorithm | None
) -> Iterator[str]:
    """Each SSP of `model` not in the task of its keys' partition before the expansion."""
    for s in model.streams:
        for p in range(s.initial, s.current):
            ssp = SystemStreamPartition(s.system, s.stream, p)
            task = model.ssp_to_task.get(ssp)
            if task is None:  # broadcast
                continue
            q = (
                p % s.initial
                if algorithm is None
                else algorithm.partition_before_expansion(p, s.current, s.initial)
            )
            owner = model.ssp_to_task.get(SystemStreamPartition(s.system, s.stream, q))
            if owner is not None and owner != task:
                yield f"{ssp} in {task!r} (its keys' partition {q} is in {owner!r})"


def check_next_version(job_name: str, latest: JobModel | None, model: JobModel) -> None:
    """InvalidJobModelError unless `model` is version 1 of an empty store or latest + 1."""
    expected = 1 if latest is None else latest.version + 1
    if model.version != expected:
        newest = "the store is empty" if latest is None else f"v{latest.version} is newest"
        raise InvalidJobModelError(
            f"cannot write job model v{model.version} of job {job_name!r}: {newest}, so the "
            f"next version must be v{expected} - build the model from the newest version"
        )


__all__ = ["check_fixed_tasks", "check_next_version", "keeps_tasks_fixed"]
