"""Groupers: Samza's task names, SEP-5 fixed tasks, broadcast, streams added/removed, refusals."""

from __future__ import annotations

import pytest

from airflow_samza_expand._kafka.partitioners import PARTITIONERS
from airflow_samza_expand.core.errors import ExpansionError, InvalidGrowthError
from airflow_samza_expand.core.groupers import (
    GROUPERS,
    AllSspToSingleTaskGrouper,
    GroupByPartition,
    GroupByPartitionFixedTasks,
    GroupBySystemStreamPartition,
    GroupBySystemStreamPartitionFixedTasks,
    grouper_by_name,
)
from airflow_samza_expand.core.model import SystemStreamPartition, mapping_from_groups


def ssps(stream: str, count: int, system: str = "kafka") -> list[SystemStreamPartition]:
    return [SystemStreamPartition(system, stream, p) for p in range(count)]


def parts(groups, task: str, stream: str | None = None) -> set[int]:
    return {s.partition for s in groups[task] if stream is None or s.stream == stream}


def S(stream: str, p: int) -> SystemStreamPartition:  # noqa: N802
    return SystemStreamPartition("kafka", stream, p)


def sspt(stream: str, p: int) -> str:
    return f"SystemStreamPartition [kafka, {stream}, {p}]"


# -- base groupers ------------------------------------------------------------------------------


def test_group_by_partition_task_names_and_members():
    groups = GroupByPartition().group(ssps("orders", 3) + ssps("payments", 2))
    assert sorted(groups) == ["Partition 0", "Partition 1", "Partition 2"]
    assert groups["Partition 0"] == {S("orders", 0), S("payments", 0)}
    assert groups["Partition 2"] == {S("orders", 2)}
    assert all(isinstance(v, frozenset) for v in groups.values())


def test_group_by_ssp_uses_samza_ssp_to_string():
    groups = GroupBySystemStreamPartition().group(ssps("orders", 2))
    assert groups == {
        "SystemStreamPartition [kafka, orders, 0]": {S("orders", 0)},
        "SystemStreamPartition [kafka, orders, 1]": {S("orders", 1)},
    }


def test_all_ssp_to_single_task_is_task_0_and_keeps_everything_on_expansion():
    grouper = AllSspToSingleTaskGrouper()
    before = grouper.group(ssps("orders", 2))
    assert before == {"Task-0": frozenset(ssps("orders", 2))}
    after = grouper.group(ssps("orders", 8), mapping_from_groups(before))
    assert after == {"Task-0": frozenset(ssps("orders", 8))}
    assert AllSspToSingleTaskGrouper(processor_id="7").group(ssps("x", 1)).keys() == {"Task-7"}


def test_plain_groupers_ignore_previous_mapping_and_move_keys():
    """Samza before SEP-5: new partitions become new tasks, so keys leave their state."""
    previous = mapping_from_groups(GroupByPartition().group(ssps("orders", 2)))
    after = GroupByPartition().group(ssps("orders", 4), previous)
    assert len(after) == 4
    assert parts(after, "Partition 2") == {2}


# -- SEP-5 fixed tasks --------------------------------------------------------------------------


def expand(grouper, before_ssps, after_ssps):
    previous = mapping_from_groups(grouper.group(before_ssps), grouper.broadcast_ssps)
    return grouper.group(after_ssps, previous)


def test_sep5_example_2_to_4():
    after = expand(GroupByPartitionFixedTasks(), ssps("orders", 2), ssps("orders", 4))
    assert after == {
        "Partition 0": {S("orders", 0), S("orders", 2)},
        "Partition 1": {S("orders", 1), S("orders", 3)},
    }


def test_one_stream_4_to_8():
    after = expand(GroupByPartitionFixedTasks(), ssps("orders", 4), ssps("orders", 8))
    assert sorted(after) == [f"Partition {k}" for k in range(4)]
    for k in range(4):
        assert parts(after, f"Partition {k}") == {k, k + 4}


def test_one_stream_4_to_8_ssp_names():
    after = expand(GroupBySystemStreamPartitionFixedTasks(), ssps("orders", 4), ssps("orders", 8))
    assert sorted(after) == sorted(sspt("orders", k) for k in range(4))
    for k in range(4):
        assert after[sspt("orders", k)] == {S("orders", k), S("orders", k + 4)}


@pytest.mark.parametrize("partitioner", sorted(PARTITIONERS))
def test_co_partitioned_join_orders_3_to_6_payments_stays_3(partitioner):
    grouper = GroupByPartitionFixedTasks()
    before = ssps("orders", 3) + ssps("payments", 3)
    after = expand(grouper, before, ssps("orders", 6) + ssps("payments", 3))
    assert sorted(after) == ["Partition 0", "Partition 1", "Partition 2"]
    for k in range(3):
        assert parts(after, f"Partition {k}", "orders") == {k, k + 3}
        assert parts(after, f"Partition {k}", "payments") == {k}
    # Each task still reads the same key range of both streams: a key's order and payment meet.
    task_of = mapping_from_groups(after)
    hash_partition = PARTITIONERS[partitioner]
    for i in range(500):
        key = f"customer-{i}".encode()
        order_task = task_of[S("orders", hash_partition(key, 6))]
        assert order_task == task_of[S("payments", hash_partition(key, 3))]


def test_co_partitioned_join_by_ssp_names_keeps_each_stream_in_its_own_tasks():
    grouper = GroupBySystemStreamPartitionFixedTasks()
    before = ssps("orders", 3) + ssps("payments", 3)
    after = expand(grouper, before, ssps("orders", 6) + ssps("payments", 3))
    assert len(after) == 6
    assert after[sspt("orders", 1)] == {S("orders", 1), S("orders", 4)}
    assert after[sspt("payments", 1)] == {S("payments", 1)}


def test_new_8_partition_stream_added_to_4_task_job_gets_base_answer():
    grouper = GroupByPartitionFixedTasks()
    previous = mapping_from_groups(grouper.group(ssps("orders", 4)))
    current = ssps("orders", 4) + ssps("clicks", 8)
    after = grouper.group(current, previous)
    assert after == GroupByPartition().group(current)
    assert parts(after, "Partition 3") == {3}  # orders 3 and clicks 3
    assert after["Partition 6"] == {S("clicks", 6)}


def test_new_stream_added_while_another_grows():
    grouper = GroupByPartitionFixedTasks()
    previous = mapping_from_groups(grouper.group(ssps("orders", 2)))
    after = grouper.group(ssps("orders", 4) + ssps("clicks", 4), previous)
    assert after["Partition 0"] == {S("orders", 0), S("orders", 2), S("clicks", 0)}
    assert after["Partition 3"] == {S("clicks", 3)}


def test_streams_removed_and_added():
    grouper = GroupByPartitionFixedTasks()
    previous = mapping_from_groups(grouper.group(ssps("orders", 4) + ssps("payments", 4)))
    after = grouper.group(ssps("payments", 4) + ssps("clicks", 2), previous)
    assert after == {
        "Partition 0": {S("payments", 0), S("clicks", 0)},
        "Partition 1": {S("payments", 1), S("clicks", 1)},
        "Partition 2": {S("payments", 2)},
        "Partition 3": {S("payments", 3)},
    }


def test_streams_removed_and_added_ssp_names():
    grouper = GroupBySystemStreamPartitionFixedTasks()
    previous = mapping_from_groups(grouper.group(ssps("orders", 2) + ssps("payments", 2)))
    after = grouper.group(ssps("payments", 2) + ssps("clicks", 2), previous)
    assert sorted(after) == sorted(
        [sspt("payments", 0), sspt("payments", 1), sspt("clicks", 0), sspt("clicks", 1)]
    )


def test_repeated_expansion_2_4_8_uses_the_4_partition_mapping():
    grouper = GroupByPartitionFixedTasks()
    v1 = mapping_from_groups(grouper.group(ssps("orders", 2)))
    v2 = mapping_from_groups(grouper.group(ssps("orders", 4), v1))
    v3 = grouper.group(ssps("orders", 8), v2)
    assert v3 == {
        "Partition 0": frozenset(S("orders", p) for p in (0, 2, 4, 6)),
        "Partition 1": frozenset(S("orders", p) for p in (1, 3, 5, 7)),
    }
    # Knowing the initial count (p % 2) gives the same answer as the step-by-step rule (p % 4).
    with_initial = GroupByPartitionFixedTasks(initial_counts={"orders": 2})
    assert with_initial.group(ssps("orders", 8), v2) == v3


def test_unchanged_counts_return_base_answer():
    for fixed, base in [
        (GroupByPartitionFixedTasks, GroupByPartition),
        (GroupBySystemStreamPartitionFixedTasks, GroupBySystemStreamPartition),
    ]:
        current = ssps("orders", 4) + ssps("payments", 2)
        previous = mapping_from_groups(base().group(current))
        assert fixed().group(current, previous) == base().group(current)
        assert fixed().group(current) == base().group(current)
        assert fixed().group(current, {}) == base().group(current)


def test_unchanged_counts_after_an_expansion_keep_the_expanded_mapping():
    """A restart on v2 must not fall back to the base answer that would move partitions 2, 3."""
    grouper = GroupByPartitionFixedTasks()
    v2 = mapping_from_groups(expand(grouper, ssps("orders", 2), ssps("orders", 4)))
    assert mapping_from_groups(grouper.group(ssps("orders", 4), v2)) == v2


def test_broadcast_ssps_go_to_every_task_before_and_after_expansion():
    config = S("config", 0)
    grouper = GroupByPartitionFixedTasks([config])
    before = grouper.group(ssps("orders", 2) + [config])
    assert all(config in members for members in before.values())
    assert len(before) == 2
    after = grouper.group(ssps("orders", 4), mapping_from_groups(before, [config]))
    assert after == {
        "Partition 0": {S("orders", 0), S("orders", 2), config},
        "Partition 1": {S("orders", 1), S("orders", 3), config},
    }
    plain = GroupBySystemStreamPartition([config]).group(ssps("orders", 2))
    assert plain[sspt("orders", 1)] == {S("orders", 1), config}


def test_custom_algorithm_is_used():
    class RangeSplit:
        """Range partitioning: partition p now covers keys of p * initial // current."""

        def partition_before_expansion(self, p, current_count, initial_count):
            return p * initial_count // current_count

    after = expand(
        GroupByPartitionFixedTasks(algorithm=RangeSplit()), ssps("orders", 2), ssps("orders", 4)
    )
    assert parts(after, "Partition 0") == {0, 1}
    assert parts(after, "Partition 1") == {2, 3}


def test_custom_algorithm_out_of_range_is_refused():
    class Broken:
        def partition_before_expansion(self, p, current_count, initial_count):
            return p

    with pytest.raises(
        ExpansionError, match=r"mapped partition 2 of stream 'orders'.*outside 0\.\.1"
    ):
        expand(GroupByPartitionFixedTasks(algorithm=Broken()), ssps("orders", 2), ssps("orders", 4))


# -- refusals -----------------------------------------------------------------------------------


def test_shrink_is_refused():
    grouper = GroupByPartitionFixedTasks()
    previous = mapping_from_groups(grouper.group(ssps("orders", 4)))
    with pytest.raises(InvalidGrowthError, match=r"'orders' shrank from 4 to 2 .*restore 4"):
        grouper.group(ssps("orders", 2), previous)


def test_non_multiple_is_refused():
    grouper = GroupBySystemStreamPartitionFixedTasks()
    previous = mapping_from_groups(grouper.group(ssps("orders", 4)))
    with pytest.raises(InvalidGrowthError, match=r"'orders' grew from 4 to 6 .*grow to 8"):
        grouper.group(ssps("orders", 6), previous)


def test_duplicate_ssps_are_refused():
    with pytest.raises(ExpansionError, match=r"duplicate SSP \[kafka, orders, 1\]"):
        GroupByPartitionFixedTasks().group(ssps("orders", 2) + [S("orders", 1)])


def test_previous_mapping_beyond_the_stream_count_is_refused():
    previous = {S("orders", 0): "Partition 0", S("orders", 5): "Partition 1"}
    with pytest.raises(ExpansionError, match=r"partition 5 of stream 'orders'.*count 2"):
        GroupByPartitionFixedTasks().group(ssps("orders", 4), previous)


def test_gap_in_current_partitions_is_refused():
    previous = mapping_from_groups(GroupByPartition().group(ssps("orders", 2)))
    with pytest.raises(ExpansionError, match=r"partition 4 of stream 'orders'.*\[3\] are missing"):
        GroupByPartitionFixedTasks().group(ssps("orders", 3) + [S("orders", 4)], previous)


def test_empty_input_is_refused():
    with pytest.raises(ExpansionError, match="no input SSPs"):
        GroupByPartition().group([])


def test_grouper_by_name_knows_all_five_and_samza_factories():
    assert set(GROUPERS) == {
        "GroupByPartition",
        "GroupBySystemStreamPartition",
        "AllSspToSingleTaskGrouper",
        "GroupByPartitionFixedTasks",
        "GroupBySystemStreamPartitionFixedTasks",
    }
    for name, cls in GROUPERS.items():
        assert type(grouper_by_name(name)) is cls
    samza = "org.apache.samza.container.grouper.stream.GroupByPartitionFactory"
    assert type(grouper_by_name(samza)) is GroupByPartition
    with pytest.raises(ExpansionError, match="unknown grouper 'Nope' - use one of"):
        grouper_by_name("Nope")
