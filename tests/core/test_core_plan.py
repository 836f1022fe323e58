"""plan_expansion: new job model, barrier SSPs, moves, determinism, refusals; and rendering."""

from __future__ import annotations

import json

import pytest

from airflow_samza_expand.core._plan import ExpansionPlan, SspMove, plan_expansion
from airflow_samza_expand.core._render import render_diagram, render_mapping_table, render_plan
from airflow_samza_expand.core.errors import ExpansionError, InvalidGrowthError
from airflow_samza_expand.core.model import JobModel, StreamPartitionCounts, SystemStreamPartition

T0, T1 = "2026-11-22T01:00:00Z", "2026-11-22T02:00:00Z"


def S(stream: str, p: int) -> SystemStreamPartition:  # noqa: N802
    return SystemStreamPartition("kafka", stream, p)


def join_model(grouper: str = "GroupByPartitionFixedTasks") -> JobModel:
    return JobModel.initial(
        "orders-counter", {"orders": 3, "payments": 3}, grouper=grouper, created_at=T0
    )


def test_plan_grows_one_stream_of_a_join():
    model = join_model()
    plan = plan_expansion(model, {"orders": 3, "payments": 3}, {"orders": 6}, created_at=T1)
    assert plan.job_name == "orders-counter"
    assert plan.streams_grown == ("orders",)
    assert plan.counts_before == {"orders": 3, "payments": 3}
    assert plan.counts_after == {"orders": 6, "payments": 3}
    assert plan.new_ssps == (S("orders", 3), S("orders", 4), S("orders", 5))
    assert plan.barrier_ssps == (S("orders", 0), S("orders", 1), S("orders", 2))
    assert plan.moved == (
        SspMove(S("orders", 3), None, "Partition 0", S("orders", 0)),
        SspMove(S("orders", 4), None, "Partition 1", S("orders", 1)),
        SspMove(S("orders", 5), None, "Partition 2", S("orders", 2)),
    )
    new = plan.new_job_model
    assert (new.version, plan.old_version, plan.new_version) == (2, 1, 2)
    assert new.created_at == T1 and new.created_by == model.created_by
    assert new.grouper == model.grouper and new.expansion_algorithm == model.expansion_algorithm
    assert new.streams[0] == StreamPartitionCounts("kafka", "orders", 6, 3)
    assert new.tasks() == model.tasks()
    assert new.task_to_ssps()["Partition 1"] == {S("orders", 1), S("orders", 4), S("payments", 1)}
    for ssp, task in model.ssp_to_task.items():  # nothing old moves
        assert new.ssp_to_task[ssp] == task


def test_repeated_plans_keep_initial_counts_and_chain_versions():
    v1 = JobModel.initial("j", {"orders": 2}, created_at=T0)
    v2 = plan_expansion(v1, None, {"orders": 4}, created_at=T1).new_job_model
    v3 = plan_expansion(v2, {"orders": 4}, {"orders": 16}, created_at=T1).new_job_model
    assert v3.version == 3
    assert v3.streams == (StreamPartitionCounts("kafka", "orders", 16, 2),)
    assert v3.task_to_ssps()["Partition 1"] == {S("orders", p) for p in range(1, 16, 2)}


def test_plan_is_deterministic_and_round_trips_through_xcom():
    a = plan_expansion(join_model(), None, {"orders": 12, "payments": 6}, created_at=T1)
    b = plan_expansion(join_model(), None, {"payments": 6, "orders": 12}, created_at=T1)
    assert a == b
    assert a.to_json() == b.to_json()
    doc = json.loads(json.dumps(a.to_dict()))  # what XCom stores
    again = ExpansionPlan.from_dict(doc)
    assert again == a
    assert again.to_json() == a.to_json()
    assert ExpansionPlan.from_json(a.to_json()) == a


def test_plan_from_malformed_dict_is_refused():
    doc = plan_expansion(join_model(), None, {"orders": 6}, created_at=T1).to_dict()
    del doc["barrier_ssps"]
    with pytest.raises(ExpansionError, match="expansion plan document is malformed"):
        ExpansionPlan.from_dict(doc)


def test_created_at_defaults_to_now():
    plan = plan_expansion(join_model(), None, {"orders": 6})
    assert plan.new_job_model.created_at != T0
    assert plan.new_job_model.created_at.endswith("Z")


def test_cluster_already_at_target_is_accepted_for_a_resumed_expansion():
    plan = plan_expansion(join_model(), {"orders": 6, "payments": 3}, {"orders": 6}, created_at=T1)
    assert plan.counts_before["orders"] == 3 and plan.counts_after["orders"] == 6


@pytest.mark.parametrize(
    ("cluster", "targets", "error", "fragments"),
    [
        (
            None,
            {"orders": 4},
            InvalidGrowthError,
            ["'orders'", "4 is not a multiple of the current count 3", "orders=6"],
        ),
        (None, {"orders": 9}, InvalidGrowthError, ["'orders'", "3 -> 9 grows by x3", "orders=12"]),
        (None, {"orders": 2}, InvalidGrowthError, ["cannot shrink from 3 to 2"]),
        (None, {"orders": 0}, InvalidGrowthError, ["must be a positive integer, got 0"]),
        (None, {"refunds": 4}, ExpansionError, ["'refunds' is not an input", "orders, payments"]),
        (None, {}, ExpansionError, ["no target given", "orders=6"]),
        (
            {"orders": 3, "payments": 6},
            {"orders": 6},
            ExpansionError,
            ["'payments' has 6 partitions on the cluster", "says 3", "payments=6"],
        ),
        ({"orders": 12, "payments": 3}, {"orders": 6}, ExpansionError, ["'orders' has 12"]),
        ({"orders": 3}, {"orders": 6}, ExpansionError, ["no partition count given", "payments"]),
    ],
)
def test_refusals(cluster, targets, error, fragments):
    with pytest.raises(error) as info:
        plan_expansion(join_model(), cluster, targets, created_at=T1)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_any_multiple_when_allowed():
    plan = plan_expansion(
        join_model(), None, {"orders": 9}, require_power_of_two=False, created_at=T1
    )
    assert plan.new_job_model.task_to_ssps()["Partition 2"] >= {S("orders", 5), S("orders", 8)}


def test_state_breaking_grouper_is_refused_unless_allowed():
    model = join_model("GroupByPartition")
    with pytest.raises(ExpansionError, match="switch the job to GroupByPartitionFixedTasks"):
        plan_expansion(model, None, {"orders": 6}, created_at=T1)
    plan = plan_expansion(
        model, None, {"orders": 6}, created_at=T1, allow_state_breaking_grouper=True
    )
    assert len(plan.new_job_model.tasks()) == 6  # the naive answer: new tasks for new partitions


def test_samza_factory_grouper_name_is_recognised_by_the_plan():
    model = join_model("org.apache.samza.container.grouper.stream.GroupByPartitionFactory")
    with pytest.raises(ExpansionError, match="switch the job to GroupByPartitionFixedTasks"):
        plan_expansion(model, None, {"orders": 6}, created_at=T1)
    plan = plan_expansion(
        model, None, {"orders": 6}, created_at=T1, allow_state_breaking_grouper=True
    )
    assert len(plan.new_job_model.tasks()) == 6


def test_custom_algorithm_of_the_job_model_is_used():
    model = JobModel.initial(
        "j",
        {"orders": 2},
        created_at=T0,
        expansion_algorithm="test_core_expansion.HalvingAlgorithm",
    )
    plan = plan_expansion(model, None, {"orders": 4}, created_at=T1)
    assert plan.new_job_model.task_to_ssps()["Partition 0"] == {S("orders", 0), S("orders", 1)}


def test_render_plan_shows_table_diagram_and_barrier():
    plan = plan_expansion(
        JobModel.initial("orders-counter", {"orders": 2}, created_at=T0),
        None,
        {"orders": 8},
        created_at=T1,
    )
    text = render_plan(plan)
    assert "job model v1 -> v2" in text
    assert "orders: 2 -> 8 partitions (x4)" in text
    assert "high watermark of 2 old partition(s)" in text
    assert "Partition 0  orders  0 2* 4* 6*" in text
    assert 'partitions 1 3* 5* 7* --> bucket 1 --> task "Partition 1"' in text
    assert "Every bucket stays in one task" in text and "WARNING" not in text
    assert text.isascii()


def test_render_tables_sort_tasks_naturally_and_truncate_long_lists():
    model = JobModel.initial("j", {"orders": 12}, created_at=T0)
    table = render_mapping_table(model)
    rows = [line.split()[1] for line in table.splitlines()[2:]]
    assert rows == [str(k) for k in range(12)]
    big = plan_expansion(
        JobModel.initial("j", {"orders": 1}, created_at=T0), None, {"orders": 64}, created_at=T1
    ).new_job_model
    diagram = render_diagram(big)
    assert "(+56 more)" in diagram and 'task "Partition 0"' in diagram


def test_render_plan_warns_when_partitions_change_task():
    plan = plan_expansion(
        join_model("GroupByPartition"),
        None,
        {"orders": 6},
        created_at=T1,
        allow_state_breaking_grouper=True,
    )
    text = render_plan(plan)
    assert "existing partition(s) change task" not in text  # orders 0-2 stay; new ones get tasks
    assert "WARNING: 3 bucket(s) are split across tasks" in text
    assert 'orders bucket 0: "Partition 0" + "Partition 3"' in text
    assert "Every bucket stays in one task" not in text
