"""Create, describe, grow and delete topics (conformance: dev broker and real Kafka)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic
from kafka_conformance_helpers import wait_for_partitions, wait_for_topic_gone


def _grow(admin, topic: str, total: int, **kwargs) -> None:
    for fut in admin.create_partitions([NewPartitions(topic, total)], **kwargs).values():
        fut.result()


def _partition_count(admin, topic: str) -> int:
    return len(admin.list_topics(topic, timeout=10).topics[topic].partitions)


def test_create_and_describe_topic(admin, create_topic) -> None:
    topic = create_topic(3, config={"cleanup.policy": "compact"})
    meta = admin.list_topics(topic, timeout=10).topics[topic]
    assert sorted(meta.partitions) == [0, 1, 2]
    assert all(p.leader >= 0 for p in meta.partitions.values())
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result()
    assert configs["cleanup.policy"].value == "compact"


def test_describe_topics_api(admin, create_topic) -> None:
    from confluent_kafka import TopicCollection

    topic = create_topic(2)
    desc = admin.describe_topics(TopicCollection([topic]))[topic].result()
    assert desc.name == topic
    assert [p.id for p in desc.partitions] == [0, 1]


def test_create_existing_topic_is_refused(admin, create_topic) -> None:
    topic = create_topic(1)
    futures = admin.create_topics([NewTopic(topic, 1, 1)])
    with pytest.raises(KafkaException) as info:
        futures[topic].result()
    assert info.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS


def test_grow_topic(admin, create_topic) -> None:
    topic = create_topic(2)
    _grow(admin, topic, 4)
    wait_for_partitions(admin, topic, 4)
    assert _partition_count(admin, topic) == 4


def test_shrink_is_refused_with_kafka_wording(admin, create_topic) -> None:
    topic = create_topic(4)
    with pytest.raises(KafkaException) as info:
        _grow(admin, topic, 2)
    err = info.value.args[0]
    assert err.code() == KafkaError.INVALID_PARTITIONS
    assert "would not be an increase" in err.str()
    assert _partition_count(admin, topic) == 4


def test_same_count_is_refused(admin, create_topic) -> None:
    topic = create_topic(3)
    with pytest.raises(KafkaException) as info:
        _grow(admin, topic, 3)
    err = info.value.args[0]
    assert err.code() == KafkaError.INVALID_PARTITIONS
    assert "already has 3 partition" in err.str()


def test_validate_only_grow_changes_nothing(admin, create_topic) -> None:
    topic = create_topic(2)
    _grow(admin, topic, 8, validate_only=True)
    assert _partition_count(admin, topic) == 2
    with pytest.raises(KafkaException) as info:
        _grow(admin, topic, 1, validate_only=True)
    assert info.value.args[0].code() == KafkaError.INVALID_PARTITIONS


def test_grow_unknown_topic_is_refused(admin, unique_topic) -> None:
    with pytest.raises(KafkaException) as info:
        _grow(admin, unique_topic("missing"), 4)
    assert info.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_delete_topic(admin, unique_topic) -> None:
    topic = unique_topic("del")
    for fut in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        fut.result()
    for fut in admin.delete_topics([topic], operation_timeout=30).values():
        fut.result()
    # Kafka's controller deletes the topic; a broker's metadata may list it a moment longer.
    wait_for_topic_gone(admin, topic)


def test_incremental_alter_configs_sets_and_deletes(admin, create_topic) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    topic = create_topic(1)
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for fut in admin.incremental_alter_configs([resource]).values():
        fut.result()
    plain = ConfigResource(ConfigResource.Type.TOPIC, topic)
    assert _policy_becomes(admin, plain, "compact")
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE)
        ],
    )
    for fut in admin.incremental_alter_configs([resource]).values():
        fut.result()
    assert _policy_becomes(admin, plain, "delete")


def _policy_becomes(admin, resource: ConfigResource, value: str, timeout_s: float = 15.0) -> bool:
    """The topic's cleanup.policy reads ``value`` within ``timeout_s``: on Apache Kafka a config
    change is applied through the controller's metadata log, and the broker that answers
    DescribeConfigs shows it a moment later (seen under load); the development broker at once."""
    deadline = time.monotonic() + timeout_s
    while True:
        current = admin.describe_configs([resource])[resource].result()["cleanup.policy"].value
        if current == value or time.monotonic() > deadline:
            return current == value
        time.sleep(0.1)


def test_invalid_config_value_is_refused(admin, create_topic) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    topic = create_topic(1)
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("cleanup.policy", "shred", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(KafkaException) as info:
        for fut in admin.incremental_alter_configs([resource]).values():
            fut.result()
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG
