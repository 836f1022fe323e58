"""Helpers of the Kafka conformance suite (public client behaviour only)."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient


def _wait_for_metadata(admin: AdminClient, topic: str, shown, what: str, timeout_s: float) -> None:
    """Poll the metadata of `topic` until `shown(meta)` holds (real clusters lag a little)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if shown(admin.list_topics(topic, timeout=10).topics.get(topic)):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"topic {topic} never showed {what} in {timeout_s}s")
        time.sleep(0.2)


def wait_for_partitions(admin: AdminClient, topic: str, count: int, timeout_s: float = 30) -> None:
    """Wait until metadata shows `topic` with `count` partitions."""

    def shown(meta) -> bool:
        return meta is not None and meta.error is None and len(meta.partitions) == count

    _wait_for_metadata(admin, topic, shown, f"{count} partitions", timeout_s)


def wait_for_topic_gone(admin: AdminClient, topic: str, timeout_s: float = 30) -> None:
    """Wait until metadata no longer shows `topic` (a broker learns of a deletion a moment late)."""

    def shown(meta) -> bool:
        return meta is None or meta.error is not None

    _wait_for_metadata(admin, topic, shown, "as deleted", timeout_s)


def produce_and_wait(producer: Producer, records: list[tuple]) -> list:
    """Produce (topic, key, value[, partition]) tuples; return delivered messages in order."""
    delivered: list = []
    errors: list = []

    def on_delivery(err, msg) -> None:
        (errors if err else delivered).append(err or msg)

    for rec in records:
        topic, key, value, *part = rec
        kwargs = {"partition": part[0]} if part else {}
        producer.produce(topic, key=key, value=value, on_delivery=on_delivery, **kwargs)
        producer.poll(0)
    remaining = producer.flush(30)
    assert remaining == 0, f"{remaining} records not delivered"
    assert not errors, errors
    return delivered


def consume(consumer: Consumer, expected: int, timeout_s: float = 30) -> list:
    """Poll until `expected` records arrive (or fail after timeout_s)."""
    got: list = []
    deadline = time.monotonic() + timeout_s
    while len(got) < expected:
        if time.monotonic() > deadline:
            raise AssertionError(f"consumed {len(got)} of {expected} records in {timeout_s}s")
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        got.append(msg)
    return got
