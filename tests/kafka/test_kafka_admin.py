"""KafkaAdmin against a broker: counts, refusals, growth, watermarks, group offsets, faults."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka_test_data import produce

from airflow_samza_expand._kafka.admin import KafkaAdmin, KafkaUnavailableError
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand.core.errors import (
    ExpansionError,
    InvalidGrowthError,
    UnknownTopicError,
)


@pytest.fixture
def config(kafka_bootstrap):
    return client_config(kafka_bootstrap)


@pytest.fixture
def admin(config):
    admin = KafkaAdmin(config, timeout_s=15)
    yield admin
    admin.close()


def test_counts_and_unknown_topic(admin, unique_topic):
    a, b = unique_topic("a"), unique_topic("b")
    assert admin.ensure_topic(a, 2) is True
    assert admin.ensure_topic(a, 5) is False  # existing topic kept as is
    admin.ensure_topic(b, 3)
    assert admin.partition_counts([a, b]) == {a: 2, b: 3}
    missing = unique_topic("missing")
    with pytest.raises(UnknownTopicError) as info:
        admin.partition_counts([a, missing])
    message = str(info.value)
    assert missing in message and a in message and admin.bootstrap in message


def test_growth_refusals_and_growth(admin, unique_topic):
    topic = unique_topic("grow")
    admin.ensure_topic(topic, 4)
    with pytest.raises(InvalidGrowthError, match="partitions can only be added"):
        admin.create_partitions(topic, 2)  # shrink
    with pytest.raises(InvalidGrowthError):
        admin.create_partitions(topic, 4)  # no change
    with pytest.raises(InvalidGrowthError, match="positive integer"):
        admin.create_partitions(topic, 0)
    assert admin.partition_counts([topic]) == {topic: 4}
    admin.create_partitions(topic, 8, validate_only=True)
    assert admin.partition_counts([topic]) == {topic: 4}
    admin.create_partitions(topic, 8)
    assert admin.partition_counts([topic]) == {topic: 8}
    with pytest.raises(UnknownTopicError):
        admin.create_partitions(unique_topic("missing"), 8)


def test_watermarks_and_committed_offsets(admin, config, unique_topic):
    topic = unique_topic("marks")
    admin.ensure_topic(topic, 2)
    produce(config, topic, [(b"k", b"v", 0)] * 3 + [(b"k", b"v", 1)] * 5)
    assert admin.watermarks(topic, [0, 1]) == {0: (0, 3), 1: (0, 5)}
    assert admin.high_watermarks({topic: [1]}) == {topic: {1: 5}}
    group = unique_topic("group")
    assert admin.committed_offsets(group, topic, [0, 1]) == {0: None, 1: None}
    consumer = Consumer({**config, "group.id": group, "enable.auto.commit": "false"})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
    finally:
        consumer.close()
    assert admin.committed_offsets(group, topic, [0, 1]) == {0: 2, 1: None}


def test_unreachable_broker_is_retryable_and_names_servers():
    admin = KafkaAdmin(client_config("127.0.0.1:9"), timeout_s=2)
    with pytest.raises(KafkaUnavailableError, match="127.0.0.1:9") as info:
        admin.partition_counts(["orders"])
    assert not isinstance(info.value, ExpansionError)


def test_create_partitions_applied_then_timed_out(dev_broker, admin, unique_topic):
    topic = unique_topic("flaky")
    admin.ensure_topic(topic, 2)
    dev_broker.faults.inject("CreatePartitions", "apply_then_timeout", times=1)
    short = KafkaAdmin(admin.config, timeout_s=2)
    with pytest.raises(KafkaUnavailableError, match=admin.bootstrap):
        short.create_partitions(topic, 4)
    # the growth was applied: a caller re-reads the count and sees it is done
    assert admin.partition_counts([topic]) == {topic: 4}


def test_broker_errors_map_to_error_classes(dev_broker, admin, unique_topic):
    topic = unique_topic("errs")
    admin.ensure_topic(topic, 2)
    dev_broker.faults.inject("CreatePartitions", "error", error="REQUEST_TIMED_OUT", times=1)
    with pytest.raises(KafkaUnavailableError):
        admin.create_partitions(topic, 4)
    dev_broker.faults.inject("CreatePartitions", "error", error="POLICY_VIOLATION", times=1)
    with pytest.raises(ExpansionError, match="POLICY_VIOLATION|[Pp]olicy"):
        admin.create_partitions(topic, 4)
    assert admin.partition_counts([topic]) == {topic: 2}
