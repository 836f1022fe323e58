"""Barrier snapshot and status with a consumer committing step by step."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka_test_data import produce

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand._protocol.barrier.reads import (
    barrier_from_dict,
    barrier_status,
    barrier_status_async,
    barrier_to_dict,
    compute_status,
    snapshot_barrier,
)


@pytest.fixture
def config(kafka_bootstrap):
    return client_config(kafka_bootstrap)


@pytest.fixture
def admin(config):
    admin = KafkaAdmin(config, timeout_s=15)
    yield admin
    admin.close()


def _commit(config, group, topic, offsets):
    consumer = Consumer({**config, "group.id": group, "enable.auto.commit": "false"})
    try:
        consumer.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False
        )
    finally:
        consumer.close()


def test_barrier_holds_exactly_when_every_old_partition_is_committed(config, admin, unique_topic):
    topic, other = unique_topic("orders"), unique_topic("clicks")
    admin.ensure_topic(topic, 2)
    admin.ensure_topic(other, 1)
    produce(config, topic, [(b"k", b"v", 0)] * 10 + [(b"k", b"v", 1)] * 6)
    admin.create_partitions(topic, 4)
    barrier = snapshot_barrier(admin, {topic: 2, other: 1})
    assert barrier == {topic: {0: 10, 1: 6}, other: {0: 0}}
    # records after the snapshot, old and new partitions, do not move the barrier
    produce(config, topic, [(b"k", b"v", p) for p in (0, 1, 2, 3)] * 3)
    group = unique_topic("job")

    status = barrier_status(admin, group, barrier)
    assert not status.holds and status.total_lag == 16
    assert status.committed[topic] == {0: None, 1: None}
    assert status.lag[other] == {0: 0}  # empty at snapshot: holds without a commit

    steps = [
        ({0: 4}, {0: 6, 1: 6}, False),
        ({0: 10}, {0: 0, 1: 6}, False),
        ({1: 5}, {0: 0, 1: 1}, False),
        ({1: 6}, {0: 0, 1: 0}, True),
        ({0: 13, 1: 9}, {0: 0, 1: 0}, True),  # past the barrier still holds
    ]
    for commit, lag, holds in steps:
        _commit(config, group, topic, commit)
        status = barrier_status(admin, group, barrier)
        assert status.lag[topic] == lag, (commit, status.describe())
        assert status.holds is holds
        assert status.total_lag == sum(lag.values())
    assert "barrier holds" in status.describe()
    assert status.to_dict()["committed"][topic] == {"0": 13, "1": 9}


def test_async_status_and_json_round_trip(config, admin, unique_topic):
    topic = unique_topic("orders")
    admin.ensure_topic(topic, 2)
    produce(config, topic, [(b"k", b"v", 0)] * 3)
    barrier = snapshot_barrier(admin, {topic: 2})
    assert barrier_from_dict(barrier_to_dict(barrier)) == barrier
    group = unique_topic("job")
    _commit(config, group, topic, {0: 1})
    status = asyncio.run(barrier_status_async(admin, group, barrier))
    assert not status.holds and status.lag[topic] == {0: 2, 1: 0}
    assert f"{topic}[0] lag 2 (committed 1, barrier 3)" in status.describe()


def test_one_offset_fetch_per_poll_however_long_one_waits(dev_broker, admin, unique_topic):
    topic = unique_topic("orders")
    admin.ensure_topic(topic, 8)
    barrier = snapshot_barrier(admin, {topic: 8})
    group = unique_topic("job")
    barrier_status(admin, group, barrier)  # warm up (connections, coordinator)
    dev_broker.faults.inject("OffsetFetch", "delay", delay_s=0.0, times=None)  # a counter
    counts = []
    for _ in range(5):
        before = dev_broker.faults.hits("OffsetFetch")
        barrier_status(admin, group, barrier)
        counts.append(dev_broker.faults.hits("OffsetFetch") - before)
    assert counts == [1, 1, 1, 1, 1]


def test_bad_inputs():
    with pytest.raises(ValueError, match="positive integer"):
        snapshot_barrier(None, {"t": 0})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a number"):
        barrier_from_dict({"t": {"x": 1}})
    with pytest.raises(ValueError, match=">= 0"):
        barrier_from_dict({"t": {"0": -1}})
    assert compute_status("g", {}, {}).holds
