"""Fault injection of the development broker, driven through dev_broker.faults."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from airflow_samza_expand._testing import FaultError


@pytest.fixture
def admin(dev_broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": dev_broker.bootstrap})


@pytest.fixture
def topic(admin: AdminClient, unique_topic) -> str:
    name = unique_topic("faults")
    for fut in admin.create_topics([NewTopic(name, 1, 1)]).values():
        fut.result()
    return name


def _grow(admin: AdminClient, topic: str, total: int, **kwargs) -> None:
    for fut in admin.create_partitions([NewPartitions(topic, total)], **kwargs).values():
        fut.result()


def _count(admin: AdminClient, topic: str) -> int:
    return len(admin.list_topics(topic, timeout=10).topics[topic].partitions)


def test_error_fault_is_not_applied_and_reports_the_code(dev_broker, admin, topic) -> None:
    dev_broker.faults.inject(api="CreatePartitions", kind="error", error="POLICY_VIOLATION")
    with pytest.raises(KafkaException) as info:
        _grow(admin, topic, 2)
    assert info.value.args[0].code() == KafkaError.POLICY_VIOLATION
    assert _count(admin, topic) == 1
    _grow(admin, topic, 2)  # times=1: the next request is served normally
    assert _count(admin, topic) == 2


def test_apply_then_timeout_applies_but_client_times_out(dev_broker, admin, topic) -> None:
    dev_broker.faults.inject(api="CreatePartitions", kind="apply_then_timeout", times=1)
    with pytest.raises(KafkaException) as info:
        _grow(admin, topic, 4, request_timeout=3)
    assert info.value.args[0].code() == KafkaError._TIMED_OUT
    assert _count(admin, topic) == 4
    assert dev_broker.faults.hits("CreatePartitions") == 1


def test_drop_connection_is_not_applied(dev_broker, admin, topic) -> None:
    dev_broker.faults.inject(api="CreatePartitions", kind="drop_connection")
    with pytest.raises(KafkaException) as info:
        _grow(admin, topic, 3)
    assert info.value.args[0].code() == KafkaError._TRANSPORT
    assert _count(admin, topic) == 1


def test_delay_then_success(dev_broker, admin, topic) -> None:
    dev_broker.faults.inject(api="CreatePartitions", kind="delay", delay_s=0.5, times=2)
    _grow(admin, topic, 2)
    _grow(admin, topic, 3)
    assert _count(admin, topic) == 3
    assert dev_broker.faults.hits("CreatePartitions") == 2


def test_clear_removes_rules(dev_broker, admin, topic) -> None:
    dev_broker.faults.inject(api="CreatePartitions", kind="error", error=44, times=None)
    dev_broker.faults.clear()
    assert dev_broker.faults.rules() == []
    _grow(admin, topic, 2)
    assert _count(admin, topic) == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"api": "NoSuchApi", "kind": "delay"}, "unknown api"),
        ({"api": "Produce", "kind": "explode"}, "unknown fault kind"),
        ({"api": "Produce", "kind": "error"}, "needs error="),
        ({"api": "Produce", "kind": "error", "error": "NOT_AN_ERROR"}, "unknown Kafka error name"),
        ({"api": "ApiVersions", "kind": "error", "error": 7}, "not available for ApiVersions"),
        ({"api": "Produce", "kind": "delay", "times": 0}, "times must be"),
    ],
)
def test_bad_rules_are_refused(dev_broker, kwargs, message) -> None:
    with pytest.raises(FaultError, match=message):
        dev_broker.faults.inject(**kwargs)
    assert dev_broker.faults.rules() == []
