"""The job-model validation at its edges (what the mutation run of scripts/mutation.sh found
open): the version rule at v1 and past the next one, the fixed-tasks rule (docs/job-model.md,
"Expansion algorithms") across broadcast SSPs, a stream that did not grow before one that
breaks it, a break whichever task sorts first, its ten-line limit, an unknown grouper and a
custom algorithm that cannot be loaded."""

from __future__ import annotations

import dataclasses

import pytest

from airflow_samza_expand.core._validate import (
    check_fixed_tasks,
    check_next_version,
    keeps_tasks_fixed,
)
from airflow_samza_expand.core.errors import ExpansionError, InvalidJobModelError
from airflow_samza_expand.core.model import JobModel, StreamPartitionCounts, SystemStreamPartition


def ssp(p: int, stream: str = "orders") -> SystemStreamPartition:
    return SystemStreamPartition("kafka", stream, p)


def model(mapping: dict, streams=((4, 2),), version: int = 2, broadcast=()) -> JobModel:
    counts = tuple(
        StreamPartitionCounts("kafka", "orders", current, initial) for current, initial in streams
    )
    return JobModel(version=version, job_name="job", streams=counts,
                    ssp_to_task={ssp(p): t for p, t in mapping.items()},
                    grouper="GroupByPartitionFixedTasks",
                    broadcast_ssps=frozenset(ssp(p) for p in broadcast))  # fmt: skip


def test_versions_start_at_one_and_follow_one_by_one():
    v1 = JobModel.initial("job", {"orders": 2})
    check_next_version("job", None, v1)
    with pytest.raises(InvalidJobModelError, match="the store is empty, so the next version "):
        check_next_version("job", None, dataclasses.replace(v1, version=2))
    with pytest.raises(InvalidJobModelError, match="v1 is newest, so the next version must be v2"):
        check_next_version("job", v1, dataclasses.replace(v1, version=3))


def test_fixed_tasks_across_a_broadcast_ssp_and_whichever_task_sorts_first():
    # partition 2 is broadcast (in no task); partition 3 belongs with 1 but is in Partition 0
    with pytest.raises(InvalidJobModelError, match=r"orders, 3\] in 'Partition 0'"):
        check_fixed_tasks(
            model({0: "Partition 0", 1: "Partition 1", 3: "Partition 0"}, broadcast=(2,))
        )
    # partition 2 in Partition 0, its keys' partition 0 in Partition 1 (a later name)
    with pytest.raises(InvalidJobModelError, match=r"orders, 2\] in 'Partition 0'"):
        check_fixed_tasks(
            model({0: "Partition 1", 1: "Partition 0", 2: "Partition 0", 3: "Partition 0"})
        )


def test_a_stream_that_did_not_grow_does_not_end_the_check():
    payments = StreamPartitionCounts("kafka", "alerts", 2, 2)  # checked first (sorted by name)
    orders = StreamPartitionCounts("kafka", "orders", 4, 2)
    broken = JobModel(
        version=2, job_name="job", streams=(payments, orders),
        ssp_to_task={ssp(0, "alerts"): "Partition 0", ssp(1, "alerts"): "Partition 1",
                     ssp(0): "Partition 0", ssp(1): "Partition 1", ssp(2): "Partition 1",
                     ssp(3): "Partition 1"},
        grouper="GroupByPartitionFixedTasks",
    )  # fmt: skip
    with pytest.raises(InvalidJobModelError, match=r"orders, 2\] in 'Partition 1'"):
        check_fixed_tasks(broken)


def test_at_most_ten_breaks_are_listed():
    mapping = {p: f"Partition {p if p < 2 else 1 - p % 2}" for p in range(32)}
    with pytest.raises(InvalidJobModelError) as err:
        check_fixed_tasks(model(mapping, streams=((32, 2),)))
    assert str(err.value).count(" (its keys' partition ") == 10


def test_an_unknown_grouper_is_not_judged():
    assert not keeps_tasks_fixed("NoSuchGrouper")
    assert keeps_tasks_fixed("GroupByPartitionFixedTasks")


def test_a_custom_algorithm_that_cannot_be_loaded_refuses_a_writer():
    valid = model({0: "Partition 0", 1: "Partition 1", 2: "Partition 0", 3: "Partition 1"})
    custom = dataclasses.replace(valid, expansion_algorithm="a.Missing")
    with pytest.raises(ExpansionError, match="cannot import module 'a'"):
        check_fixed_tasks(custom)
    check_fixed_tasks(custom, need_algorithm=False)  # a reader skips the check
