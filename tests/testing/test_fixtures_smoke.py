"""The root Kafka fixtures give a reachable broker and unique topic names."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient


def test_kafka_bootstrap_answers_metadata(kafka_bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    metadata = admin.list_topics(timeout=15)
    assert metadata.brokers, "the broker should list itself"


def test_unique_topic_names_differ(unique_topic) -> None:
    names = {unique_topic("x") for _ in range(50)}
    assert len(names) == 50
    assert all(n.startswith("x-") for n in names)


def test_dev_broker_has_faults_and_bootstrap(dev_broker, kafka_bootstrap: str) -> None:
    assert dev_broker.bootstrap == kafka_bootstrap
    assert dev_broker.faults.rules() == []
