"""A partition whose leader is still being elected (just created, or moving) is waited for.

Apache Kafka answers ListOffsets for a partition created a moment ago with
NOT_LEADER_OR_FOLLOWER until its leader is known; librdkafka hands that answer back as is. CI
met it on real Kafka right after a growth. The development broker injects the same answer.
"""

from __future__ import annotations

import pytest

from airflow_samza_expand._kafka.admin import KafkaAdmin, KafkaUnavailableError
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand.core.errors import UnknownTopicError


@pytest.fixture
def admin(dev_broker):
    return KafkaAdmin(client_config(dev_broker.bootstrap), timeout_s=5)


@pytest.mark.parametrize("error", ["NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE"])
def test_end_offsets_wait_while_a_leader_is_elected(dev_broker, admin, unique_topic, error):
    topic = unique_topic("orders")
    admin.ensure_topic(topic, 2)
    dev_broker.faults.inject("ListOffsets", "error", error=error, times=2)
    assert admin.high_watermarks({topic: [0, 1]}) == {topic: {0: 0, 1: 0}}
    assert dev_broker.faults.hits("ListOffsets") == 2  # the answers really said so


def test_end_offsets_give_up_retryably_when_no_leader_comes(dev_broker, admin, unique_topic):
    topic = unique_topic("orders")
    admin.ensure_topic(topic, 2)
    dev_broker.faults.inject("ListOffsets", "error", error="NOT_LEADER_OR_FOLLOWER", times=None)
    try:
        with pytest.raises(KafkaUnavailableError, match="reading end offsets"):
            admin.high_watermarks({topic: [0, 1]})
    finally:
        dev_broker.faults.clear()
    assert admin.high_watermarks({topic: [0, 1]}) == {topic: {0: 0, 1: 0}}


def test_end_offsets_are_never_an_unknown_offset(dev_broker, admin, unique_topic, caplog):
    """A broker that no longer leads a partition (its leader was just killed) can answer
    ListOffsets with no error and offset -1 / -1001; a barrier snapshot of it would pass at
    once. The development broker answers so (error code 0, offset -1) on demand."""
    topic = unique_topic("orders")
    admin.ensure_topic(topic, 2)
    dev_broker.faults.inject("ListOffsets", "error", error=0, times=2)
    with caplog.at_level("INFO", logger="airflow_samza_expand._kafka.admin"):
        assert admin.high_watermarks({topic: [0, 1]}) == {topic: {0: 0, 1: 0}}
    assert dev_broker.faults.hits("ListOffsets") == 2
    assert "no offset yet" in caplog.text  # the wait says why


def test_end_offsets_give_up_retryably_when_no_offset_comes(dev_broker, admin, unique_topic):
    topic = unique_topic("orders")
    admin.ensure_topic(topic, 1)
    dev_broker.faults.inject("ListOffsets", "error", error=0, times=None)
    try:
        with pytest.raises(KafkaUnavailableError, match=r"no offset for .*-0"):
            admin.high_watermarks({topic: [0]})
    finally:
        dev_broker.faults.clear()


def test_a_long_lived_admin_sees_partitions_added_by_someone_else(kafka_bootstrap, unique_topic):
    """The sensors keep one admin for hours; a growth done by another client must not make
    its offset reads fail until something refreshes its metadata."""
    config = client_config(kafka_bootstrap)
    topic = unique_topic("orders")
    with KafkaAdmin(config, timeout_s=15) as long_lived, KafkaAdmin(config, timeout_s=15) as other:
        long_lived.ensure_topic(topic, 2)
        assert long_lived.high_watermarks({topic: [0, 1]}) == {topic: {0: 0, 1: 0}}
        other.create_partitions(topic, 4)
        assert long_lived.high_watermarks({topic: [0, 1, 2, 3]})[topic] == {0: 0, 1: 0, 2: 0, 3: 0}
        assert long_lived.low_watermarks({topic: [2, 3]})[topic] == {2: 0, 3: 0}


def _lagging_metadata(monkeypatch, topic: str, old: int, new: int, times: float) -> dict:
    """The broker answering Metadata with the count before a growth, ``times`` times: Apache
    Kafka applies CreatePartitions in the controller and a broker learns of it a moment later
    (CI met it). A real broker's lag cannot be made to last; this wraps the real answer."""
    real = KafkaAdmin.partition_counts
    left = {"n": times}

    def lagging(self, topics):
        counts = real(self, topics)
        if left["n"] > 0 and counts.get(topic) == new:
            left["n"] -= 1
            return {**counts, topic: old}
        return counts

    monkeypatch.setattr(KafkaAdmin, "partition_counts", lagging)
    return left


def test_a_growth_returns_once_the_brokers_metadata_shows_it(admin, unique_topic, monkeypatch):
    topic = unique_topic("orders")
    admin.ensure_topic(topic, 2)
    left = _lagging_metadata(monkeypatch, topic, 2, 4, times=3)
    admin.create_partitions(topic, 4)
    assert left["n"] == 0  # it asked until the metadata showed the new partitions
    assert admin.partition_counts([topic]) == {topic: 4}


def test_a_growth_the_metadata_never_shows_is_a_retryable_failure(admin, unique_topic, monkeypatch):
    topic = unique_topic("orders")
    admin.ensure_topic(topic, 2)
    _lagging_metadata(monkeypatch, topic, 2, 4, times=float("inf"))
    with pytest.raises(KafkaUnavailableError, match=r"growing topic .* to 4 partitions.*2 of 4"):
        admin.create_partitions(topic, 4)
    monkeypatch.undo()
    assert admin.partition_counts([topic]) == {topic: 4}  # applied: a retry finds it done


def _topic_unknown_for(monkeypatch, topic: str, times: float) -> dict:
    """The broker answering Metadata without a topic created a moment ago, ``times`` times:
    Apache Kafka creates it in the controller and a broker learns of it a moment later (CI met
    the same lag on a deletion). This wraps the real answer."""
    real = KafkaAdmin.partition_counts
    left = {"n": times}

    def lagging(self, topics):
        counts = real(self, topics)
        if left["n"] > 0 and topic in counts:
            left["n"] -= 1
            raise UnknownTopicError(f"topic {topic!r} does not exist (lagging metadata)")
        return counts

    monkeypatch.setattr(KafkaAdmin, "partition_counts", lagging)
    return left


@pytest.mark.parametrize("exists", [False, True], ids=["created", "created-by-another"])
def test_ensure_topic_returns_once_the_brokers_metadata_shows_it(
    admin, unique_topic, monkeypatch, exists
):
    """Whoever created it (this call, or another process a moment before), the topic is
    readable when ensure_topic returns: a plan right after it must not call it unknown."""
    topic = unique_topic("orders")
    if exists:
        with KafkaAdmin(admin.config, timeout_s=5) as other:
            other.ensure_topic(topic, 2)
    left = _topic_unknown_for(monkeypatch, topic, times=3)
    assert admin.ensure_topic(topic, 2) is not exists
    assert left["n"] == 0  # it asked until the metadata showed the topic
    assert admin.partition_counts([topic]) == {topic: 2}


def test_a_topic_the_metadata_never_shows_is_a_retryable_failure(admin, unique_topic, monkeypatch):
    topic = unique_topic("orders")
    _topic_unknown_for(monkeypatch, topic, times=float("inf"))
    with pytest.raises(KafkaUnavailableError, match=r"creating topic .*shows 0 of 2 partitions"):
        admin.ensure_topic(topic, 2)
    monkeypatch.undo()
    assert admin.partition_counts([topic]) == {topic: 2}  # created: a retry finds it there
