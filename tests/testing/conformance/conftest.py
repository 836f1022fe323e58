"""Fixtures of the Kafka conformance suite: every test here runs twice, on the development
broker and on Apache Kafka (or the cluster KAFKA_BOOTSTRAP_SERVERS names), side by side: the
development broker is held to what Kafka does. `kafka_bootstrap` is overridden here by the
parametrized `broker` fixture."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_conformance_helpers import wait_for_partitions


@pytest.fixture(params=["dev-broker", "apache-kafka"])
def broker(request: pytest.FixtureRequest) -> str:
    """Bootstrap servers of each broker in turn: the development broker, then Apache Kafka
    (KAFKA_BOOTSTRAP_SERVERS instead when set)."""
    if request.param == "dev-broker":
        return request.getfixturevalue("dev_broker_server").bootstrap
    real = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    return real or request.getfixturevalue("apache_kafka_server").bootstrap


@pytest.fixture
def kafka_bootstrap(broker: str) -> str:
    return broker


@pytest.fixture
def admin(kafka_bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": kafka_bootstrap})


@pytest.fixture
def create_topic(admin: AdminClient, unique_topic) -> Iterator[Callable[..., str]]:
    """create_topic(partitions, config=None, prefix="conf") -> name; deleted after the test."""
    created: list[str] = []

    def make(partitions: int, config: dict[str, str] | None = None, prefix: str = "conf") -> str:
        name = unique_topic(prefix)
        new = NewTopic(name, partitions, 1, config=config or {})
        for fut in admin.create_topics([new], operation_timeout=30).values():
            fut.result()
        created.append(name)
        wait_for_partitions(admin, name, partitions)
        return name

    yield make
    if created:
        for fut in admin.delete_topics(created, operation_timeout=30).values():
            with contextlib.suppress(Exception):  # cleanup only
                fut.result()
