"""docs/design.md 'Fixed tasks' and the max_partitions refusal (pure core)."""

from __future__ import annotations

import dataclasses

import pytest

from airflow_samza_expand.core import groupers
from airflow_samza_expand.core._plan import DEFAULT_MAX_PARTITIONS, plan_expansion
from airflow_samza_expand.core._validate import check_fixed_tasks, check_next_version
from airflow_samza_expand.core.errors import (
    ExpansionError,
    InvalidJobModelError,
    MaxPartitionsError,
)
from airflow_samza_expand.core.model import JobModel, StreamPartitionCounts, SystemStreamPartition


def ssp(p: int) -> SystemStreamPartition:
    return SystemStreamPartition("kafka", "orders", p)


def model(mapping: dict[int, str], grouper: str = "GroupByPartitionFixedTasks") -> JobModel:
    return JobModel(
        version=2,
        job_name="job",
        streams=(StreamPartitionCounts("kafka", "orders", 4, 2),),
        ssp_to_task={ssp(p): task for p, task in mapping.items()},
        grouper=grouper,
    )


def test_fixed_tasks_accept_p_mod_initial_and_name_every_break():
    check_fixed_tasks(
        model({0: "Partition 0", 2: "Partition 0", 1: "Partition 1", 3: "Partition 1"})
    )
    broken = model({0: "Partition 0", 1: "Partition 0", 2: "Partition 1", 3: "Partition 1"})
    with pytest.raises(InvalidJobModelError, match="fixed tasks") as caught:
        check_fixed_tasks(broken)
    text = str(caught.value)
    assert "[kafka, orders, 2] in 'Partition 1' (its keys' partition 0 is in 'Partition 0')" in text
    assert "[kafka, orders, 3]" in text and "plan_expansion" in text
    # a grouper that does not keep tasks fixed is not bound by the rule
    check_fixed_tasks(model({0: "P0", 1: "P0", 2: "P1", 3: "P1"}, grouper="GroupByPartition"))


def test_plans_keep_fixed_tasks_and_versions_follow():
    v1 = JobModel.initial("job", {"orders": 2})
    v2 = plan_expansion(v1, None, {"orders": 8}).new_job_model
    check_fixed_tasks(v2)
    check_next_version("job", v1, v2)
    with pytest.raises(InvalidJobModelError, match="must be v2"):
        check_next_version("job", v1, v1)


def test_a_target_above_max_partitions_is_refused_before_any_work(monkeypatch):
    calls = []
    real = groupers.grouper_by_name

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr("airflow_samza_expand.core._plan.grouper_by_name", counting)
    v1 = JobModel.initial("job", {"orders": 2})
    with pytest.raises(MaxPartitionsError, match=r"target 1048576 .* max_partitions=4096") as c:
        plan_expansion(v1, None, {"orders": 2**20})
    assert "choose a smaller target" in str(c.value)
    assert calls == []  # refused before the grouper (or anything per partition) ran
    assert DEFAULT_MAX_PARTITIONS == 4096
    with pytest.raises(MaxPartitionsError, match="max_partitions=8"):
        plan_expansion(v1, None, {"orders": 16}, max_partitions=8)
    assert plan_expansion(v1, None, {"orders": 16}, max_partitions=16).counts_after == {
        "orders": 16
    }
    assert calls  # a plan within the limit does call it: the count above can fail


def test_a_custom_algorithm_is_needed_to_write_not_to_read():
    v1 = JobModel.initial("job", {"orders": 2})
    v2 = plan_expansion(v1, None, {"orders": 4}).new_job_model
    custom = dataclasses.replace(v2, expansion_algorithm="no_such_module.Algorithm")
    with pytest.raises(ExpansionError, match="no_such_module"):
        check_fixed_tasks(custom)
    check_fixed_tasks(custom, need_algorithm=False)  # a reader without the plugin


def test_the_refusal_lists_ten_breaks_over_all_streams():
    """Two streams of twelve broken SSPs each: ten are listed in all, not ten a stream."""
    streams = ("orders", "payments")
    broken = JobModel(
        version=2,
        job_name="job",
        streams=tuple(StreamPartitionCounts("kafka", s, 16, 4) for s in streams),
        ssp_to_task={
            SystemStreamPartition("kafka", s, p): f"Partition {(p + p // 4) % 4}"
            for s in streams
            for p in range(16)
        },
    )
    with pytest.raises(InvalidJobModelError, match="fixed tasks") as caught:
        check_fixed_tasks(broken)
    assert str(caught.value).count("(its keys' partition") == 10
