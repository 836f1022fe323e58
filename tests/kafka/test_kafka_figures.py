"""Live figures for the growth policy, measured on a real broker over TCP."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka_test_data import produce

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand._kafka.figures import measure_topic, sample_record_bytes
from airflow_samza_expand.core.policy import GrowthPolicy, decide


@pytest.fixture
def config(kafka_bootstrap):
    return client_config(kafka_bootstrap)


@pytest.fixture
def admin(config):
    admin = KafkaAdmin(config, timeout_s=15)
    yield admin
    admin.close()


class WindowClock:
    """A measuring window whose 'sleep' produces records: the rate is known exactly."""

    def __init__(self, during_window) -> None:
        self.now = 100.0
        self.during_window = during_window

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        if self.during_window is not None:
            self.during_window()
            self.during_window = None
        self.now += seconds


def test_size_rate_and_lag_are_measured(admin, config, unique_topic):
    topic, group = unique_topic("fig"), unique_topic("group")
    admin.ensure_topic(topic, 2)
    produce(config, topic, [(b"k" * 10, b"v" * 90, 0)] * 40 + [(b"k" * 10, b"v" * 40, 1)] * 10)
    consumer = Consumer({**config, "group.id": group, "enable.auto.commit": "false"})
    try:
        consumer.commit(
            offsets=[TopicPartition(topic, 0, 30), TopicPartition(topic, 1, 10)],
            asynchronous=False,
        )
    finally:
        consumer.close()
    window = WindowClock(lambda: produce(config, topic, [(b"k" * 10, b"v" * 40, 1)] * 20))
    policy = GrowthPolicy(max_partition_bytes=1000, rate_window_s=10)

    figures = measure_topic(admin, topic, group, policy, sleep=window.sleep, clock=window.clock)

    assert figures.partitions == 2
    assert figures.largest_partition == 0
    assert figures.largest_partition_bytes == 40 * 100  # 40 records of 10 + 90 bytes
    assert figures.busiest_partition == 1
    assert figures.max_records_per_s_per_partition == pytest.approx(20 / 10)
    assert figures.lag_records == 10 + 20  # 10 behind on p0, 20 new on p1
    assert figures.lag_growth_records == 20
    decision = decide(policy, figures)
    assert decision.factor == 4  # 4000 bytes / 1000 -> x4
    assert "partition 0 holds 4000 bytes (estimated)" in decision.describe()


def test_a_group_without_commits_has_no_lag_figure(admin, config, unique_topic):
    topic = unique_topic("fig")
    admin.ensure_topic(topic, 1)
    window = WindowClock(None)
    figures = measure_topic(
        admin, topic, unique_topic("group"), GrowthPolicy(max_lag_records=5, rate_window_s=1),
        sleep=window.sleep, clock=window.clock,
    )
    assert figures.lag_records is None and figures.lag_growth_records is None
    assert figures.largest_partition_bytes == 0
    assert figures.max_records_per_s_per_partition == 0


def test_sample_reads_only_the_newest_records(admin, config, unique_topic):
    topic = unique_topic("fig")
    admin.ensure_topic(topic, 1)
    produce(config, topic, [(b"k", b"x" * 999, 0)] * 5 + [(b"k", b"y" * 9, 0)] * 10)
    assert sample_record_bytes(config, topic, {0: (0, 15)}, per_partition=10) == {0: 10.0}
    assert sample_record_bytes(config, topic, {0: (3, 3)}) == {0: 0.0}
