"""The groupers' and the expansion algorithm's refusals and edges, each at the value where the
decision turns (what the mutation run of scripts/mutation.sh found open): negative and zero
counts, a partition one past the end, growth from a count to itself, the initial count 1,
broadcast SSPs anywhere in the input and in the previous mapping, a custom algorithm out of
range."""

from __future__ import annotations

import pytest

from airflow_samza_expand.core.errors import (
    ExpansionError,
    InvalidGrowthError,
    InvalidJobModelError,
)
from airflow_samza_expand.core.expansion import (
    DefaultPartitionExpansionAlgorithm,
    is_power_of_two,
    validate_growth,
)
from airflow_samza_expand.core.groupers import (
    AllSspToSingleTaskGrouper,
    GroupByPartition,
    GroupByPartitionFixedTasks,
    GroupBySystemStreamPartition,
    GroupBySystemStreamPartitionFixedTasks,
)
from airflow_samza_expand.core.model import SystemStreamPartition

ALGO = DefaultPartitionExpansionAlgorithm()


def S(stream: str, p: int) -> SystemStreamPartition:  # noqa: N802
    return SystemStreamPartition("kafka", stream, p)


def test_is_power_of_two_at_its_edges():
    assert [n for n in range(-4, 10) if is_power_of_two(n)] == [1, 2, 4, 8]


@pytest.mark.parametrize(("current", "initial"), [(4, 0), (4, -2), (0, 2), (-4, 2)])
def test_the_algorithm_refuses_counts_that_are_not_positive(current, initial):
    with pytest.raises(InvalidGrowthError, match="partition counts must be positive"):
        ALGO.partition_before_expansion(0, current, initial)


def test_the_algorithm_at_its_edges():
    assert ALGO.partition_before_expansion(3, 4, 4) == 3  # not grown: the same partition
    assert ALGO.partition_before_expansion(0, 1, 1) == 0  # one partition, never grown
    assert ALGO.partition_before_expansion(3, 4, 1) == 0
    assert ALGO.partition_before_expansion(5, 6, 3) == 2
    for p in (-1, 4, 5):
        with pytest.raises(InvalidGrowthError, match=rf"partition {p} is outside 0..3"):
            ALGO.partition_before_expansion(p, 4, 2)
    with pytest.raises(InvalidGrowthError, match="is not a multiple"):
        ALGO.partition_before_expansion(0, 2, 4)


def test_validate_growth_suggests_only_a_real_lower_multiple():
    with pytest.raises(InvalidGrowthError) as err:
        validate_growth("s", 300, 450, require_power_of_two=False)
    assert str(err.value).endswith("choose s=600"), err.value
    with pytest.raises(InvalidGrowthError) as err:
        validate_growth("s", 300, 750, require_power_of_two=False)
    assert str(err.value).endswith("choose s=900 or s=600"), err.value


def test_only_the_fixed_task_groupers_and_the_single_task_keep_state():
    keep = {g.name: g.keeps_state_on_expansion for g in (
        GroupByPartition, GroupBySystemStreamPartition, AllSspToSingleTaskGrouper,
        GroupByPartitionFixedTasks, GroupBySystemStreamPartitionFixedTasks)}  # fmt: skip
    assert keep == {
        "GroupByPartition": False, "GroupBySystemStreamPartition": False,
        "AllSspToSingleTaskGrouper": True, "GroupByPartitionFixedTasks": True,
        "GroupBySystemStreamPartitionFixedTasks": True,
    }  # fmt: skip


def test_a_broadcast_ssp_first_in_the_input_is_skipped_not_the_rest():
    config = S("config", 0)
    groups = GroupByPartition([config]).group([config, S("o", 0), S("o", 1)])
    assert groups == {
        "Partition 0": frozenset({S("o", 0), config}),
        "Partition 1": frozenset({S("o", 1), config}),
    }
    by_ssp = GroupBySystemStreamPartition([config]).group([config, S("o", 0)])
    assert list(by_ssp) == ["SystemStreamPartition [kafka, o, 0]"]  # no task of its own
    assert repr(GroupByPartition([config])) == "GroupByPartition(broadcast_ssps=1)"
    assert repr(GroupByPartition()) == "GroupByPartition()"


def test_a_new_stream_first_and_a_broadcast_ssp_first_in_the_previous_mapping():
    config = S("config", 0)
    grouper = GroupByPartitionFixedTasks([config])
    previous = {config: "Partition 0", S("o", 0): "Partition 0", S("o", 1): "Partition 1"}
    groups = grouper.group([S("n", 0), S("o", 0), S("o", 1), S("o", 2), S("o", 3)], previous)
    assert groups["Partition 0"] == frozenset({S("n", 0), S("o", 0), S("o", 2), config})
    assert groups["Partition 1"] == frozenset({S("o", 1), S("o", 3), config})


def test_a_negative_partition_is_refused():
    with pytest.raises(InvalidJobModelError, match="negative partition"):
        GroupByPartition().group([S("o", -1)])


def test_the_previous_mapping_leaves_its_broadcast_ssps_out_and_must_name_tasks():
    config = S("config", 1)  # the only partition of its stream that is broadcast
    grouper = GroupByPartitionFixedTasks([config])
    previous = {S("o", 0): "Partition 0", S("o", 1): "Partition 1", config: "Partition 0"}
    groups = grouper.group([S("o", p) for p in range(4)] + [config], previous)
    assert sorted(groups) == ["Partition 0", "Partition 1"]
    with pytest.raises(InvalidJobModelError, match="previous mapping must map"):
        grouper.group([S("o", 0)], {S("o", 0): 5})


def test_a_previous_mapping_with_a_gap_names_the_system_and_the_stream():
    with pytest.raises(InvalidJobModelError) as err:
        GroupByPartitionFixedTasks().group([S("o", 0), S("o", 1)], {S("o", 1): "Partition 1"})
    assert "names partition 1 of stream 'o' (kafka)" in str(err.value)
    with pytest.raises(InvalidJobModelError) as err:  # the first ten missing are named
        GroupByPartitionFixedTasks().group([S("o", 0), S("o", 1)], {S("o", 12): "Partition 0"})
    assert "(partitions [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] are missing)" in str(err.value)


@pytest.mark.parametrize("initial", [0, -2, 3])
def test_an_initial_count_that_does_not_divide_the_previous_one_is_refused(initial):
    grouper = GroupByPartitionFixedTasks(initial_counts={"o": initial})
    previous = {S("o", p): f"Partition {p}" for p in range(4)}
    with pytest.raises(InvalidGrowthError, match=f"stream 'o': previous count 4 .* {initial} -"):
        grouper.group([S("o", p) for p in range(8)], previous)


def test_an_initial_count_of_one_maps_every_new_partition_to_the_first_task():
    grouper = GroupByPartitionFixedTasks(initial_counts={"o": 1})
    groups = grouper.group([S("o", 0), S("o", 1)], {S("o", 0): "Partition 0"})
    assert groups == {"Partition 0": frozenset({S("o", 0), S("o", 1)})}


class _Minus:
    """A custom algorithm that answers a partition out of range."""

    def __init__(self, answer: int) -> None:
        self.answer = answer

    def partition_before_expansion(self, p: int, current_count: int, initial_count: int) -> int:
        return self.answer


@pytest.mark.parametrize("answer", [-1, 2, 3, True])
def test_a_custom_algorithm_out_of_range_is_refused(answer):
    grouper = GroupByPartitionFixedTasks(algorithm=_Minus(answer))
    previous = {S("o", 0): "Partition 0", S("o", 1): "Partition 1"}
    with pytest.raises(ExpansionError, match=rf"to {answer}, outside 0\.\.1"):
        grouper.group([S("o", p) for p in range(4)], previous)


def test_a_previous_mapping_with_a_negative_partition_is_refused():
    with pytest.raises(InvalidJobModelError, match="beyond the stream's partition count"):
        GroupByPartitionFixedTasks().group(
            [S("o", 0), S("o", 1)], {S("o", -1): "Partition 0", S("o", 1): "Partition 1"}
        )
