"""The offset reads ask again every answer Kafka marks retriable (its protocol's RetriableException
codes: an error built from an answer's code carries no retriable() flag), until their timeout,
and raise any other at once. The development broker answers ListOffsets with the error (a
restart fencing a cached leader epoch on Apache Kafka: tests/spark/test_spark_source_restart)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config


@pytest.fixture
def admin(dev_broker):
    return KafkaAdmin(client_config(dev_broker.bootstrap), timeout_s=10)


@pytest.mark.parametrize(
    "error", ["REQUEST_TIMED_OUT", "KAFKA_STORAGE_ERROR", "FENCED_LEADER_EPOCH", "NOT_CONTROLLER"]
)
def test_offsets_ask_again_what_kafka_marks_retriable(dev_broker, admin, unique_topic, error):
    topic = unique_topic("orders")
    admin.ensure_topic(topic, 2)
    dev_broker.faults.inject("ListOffsets", "error", error=error, times=2)
    assert admin.low_watermarks({topic: [0, 1]}) == {topic: {0: 0, 1: 0}}
    assert dev_broker.faults.hits("ListOffsets") == 2  # the answers really said so


def test_an_error_kafka_does_not_mark_retriable_is_raised_at_once(dev_broker, admin, unique_topic):
    topic = unique_topic("orders")
    admin.ensure_topic(topic, 2)
    dev_broker.faults.inject("ListOffsets", "error", error="UNKNOWN_SERVER_ERROR", times=None)
    try:
        with pytest.raises(KafkaException, match="Unknown broker error"):
            admin.high_watermarks({topic: [0, 1]})
        assert dev_broker.faults.hits("ListOffsets") == 1  # asked once
    finally:
        dev_broker.faults.clear()
