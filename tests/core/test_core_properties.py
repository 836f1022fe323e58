"""Property tests: under chains of power-of-two expansions a key never leaves its task.

For random keys, initial counts 1..64 and both real default partitioners (Java murmur2 and
librdkafka CRC32), the task that reads ``hash(key) % N_now`` is the task that read
``hash(key) % N_initial``, at every step of the chain.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_samza_expand._kafka.partitioners import PARTITIONERS
from airflow_samza_expand.core._plan import plan_expansion
from airflow_samza_expand.core.groupers import (
    GroupByPartition,
    GroupByPartitionFixedTasks,
    GroupBySystemStreamPartition,
    GroupBySystemStreamPartitionFixedTasks,
)
from airflow_samza_expand.core.model import JobModel, SystemStreamPartition, mapping_from_groups

T0 = "2026-11-22T00:00:00Z"
MAX_PARTITIONS = 4096
PROPERTY_SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

keys = st.lists(st.binary(min_size=1, max_size=24), min_size=1, max_size=40, unique=True)
exponents = st.lists(st.integers(min_value=1, max_value=3), min_size=1, max_size=4)
fixed_groupers = st.sampled_from(
    ["GroupByPartitionFixedTasks", "GroupBySystemStreamPartitionFixedTasks"]
)


def chain(initial: int, steps: list[int]) -> list[int]:
    counts = [initial]
    for k in steps:
        if counts[-1] << k > MAX_PARTITIONS:
            break
        counts.append(counts[-1] << k)
    return counts


def task_of(model: JobModel, key: bytes, partitioner: str) -> str:
    count = model.partition_counts()["orders"]
    partition = PARTITIONERS[partitioner](key, count)
    return model.ssp_to_task[SystemStreamPartition("kafka", "orders", partition)]


@PROPERTY_SETTINGS
@given(
    initial=st.integers(min_value=1, max_value=64),
    steps=exponents,
    keys=keys,
    grouper=fixed_groupers,
)
def test_key_stays_in_its_task_through_a_chain_of_plans(initial, steps, keys, grouper):
    model = JobModel.initial(
        "job", {"orders": initial, "payments": 3}, grouper=grouper, created_at=T0
    )
    first = model
    for count in chain(initial, steps)[1:]:
        model = plan_expansion(model, None, {"orders": count}, created_at=T0).new_job_model
        assert model.tasks() == first.tasks()
        for key in keys:
            for partitioner in PARTITIONERS:
                assert task_of(model, key, partitioner) == task_of(first, key, partitioner)


@PROPERTY_SETTINGS
@given(initial=st.integers(min_value=1, max_value=64), steps=exponents, keys=keys)
def test_step_by_step_grouping_equals_initial_count_rule(initial, steps, keys):
    """Samza's shipped rule (task of p % previous) equals SEP-5's (task of p % initial)."""
    counts = chain(initial, steps)

    def ssps(n: int) -> list[SystemStreamPartition]:
        return [SystemStreamPartition("kafka", "orders", p) for p in range(n)]

    stepwise = GroupByPartitionFixedTasks()
    mapping = mapping_from_groups(stepwise.group(ssps(initial)))
    first = dict(mapping)
    for count in counts[1:]:
        mapping = mapping_from_groups(stepwise.group(ssps(count), mapping))
        direct = GroupByPartitionFixedTasks(initial_counts={"orders": initial})
        assert mapping_from_groups(direct.group(ssps(count), first)) == mapping
        for key in keys:
            for hash_partition in PARTITIONERS.values():
                now = SystemStreamPartition("kafka", "orders", hash_partition(key, count))
                then = SystemStreamPartition("kafka", "orders", hash_partition(key, initial))
                assert mapping[now] == first[then]


@PROPERTY_SETTINGS
@given(
    counts=st.dictionaries(
        st.sampled_from(["orders", "payments", "clicks", "refunds"]),
        st.integers(min_value=1, max_value=40),
        min_size=1,
    )
)
def test_fixed_tasks_without_change_equal_the_base_grouper(counts):
    ssps = [
        SystemStreamPartition("kafka", stream, p) for stream, n in counts.items() for p in range(n)
    ]
    for fixed, base in [
        (GroupByPartitionFixedTasks(), GroupByPartition()),
        (GroupBySystemStreamPartitionFixedTasks(), GroupBySystemStreamPartition()),
    ]:
        expected = base.group(ssps)
        assert fixed.group(ssps) == expected
        assert fixed.group(ssps, mapping_from_groups(expected)) == expected


def test_the_property_fails_for_the_naive_grouper():
    """The checks above can fail: plain GroupByPartition moves keys to new tasks on 2 -> 4."""
    model = JobModel.initial("job", {"orders": 2}, grouper="GroupByPartition", created_at=T0)
    grown = plan_expansion(
        model, None, {"orders": 4}, created_at=T0, allow_state_breaking_grouper=True
    ).new_job_model
    moved = [
        key
        for key in (f"key-{i}".encode() for i in range(100))
        if task_of(grown, key, "murmur2") != task_of(model, key, "murmur2")
    ]
    assert moved
