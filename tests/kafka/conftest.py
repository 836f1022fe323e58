"""Fixtures of the Kafka conformance suite: public client behaviour only, so every test here
passes against the development broker and against a real cluster (KAFKA_BOOTSTRAP_SERVERS)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_conformance_helpers import wait_for_partitions


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
