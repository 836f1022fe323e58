"""Produce and fetch with each compression codec, and the compacted-topic semantics the
coordinator store relies on (conformance: dev broker and Apache Kafka)."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource
from kafka_conformance_helpers import consume, produce_and_wait


def _read_all(bootstrap: str, topic: str, expected: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "conformance-reader",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        return consume(consumer, expected)
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_and_fetch_each_compression(kafka_bootstrap, create_topic, codec) -> None:
    topic = create_topic(1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "compression.type": codec,
                         "linger.ms": 20})  # fmt: skip
    values = [b"%s value %d " % (codec.encode(), i) * 20 for i in range(50)]
    delivered = produce_and_wait(producer, [(topic, b"k%d" % (i % 7), v, 0)
                                            for i, v in enumerate(values)])  # fmt: skip
    assert [m.offset() for m in delivered] == list(range(50))
    got = _read_all(kafka_bootstrap, topic, 50)
    assert [m.value() for m in got] == values
    assert [m.key() for m in got] == [b"k%d" % (i % 7) for i in range(50)]
    assert [m.offset() for m in got] == list(range(50))


def test_compacted_topic_keeps_log_order_and_tombstones(admin, kafka_bootstrap, create_topic):
    """The store reads its compacted topic from the start and keeps the last value per key;
    before the cleaner runs every record is there, in offset order, tombstones included."""
    topic = create_topic(1, config={"cleanup.policy": "compact"})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    assert admin.describe_configs([resource])[resource].result()["cleanup.policy"].value == (
        "compact"
    )
    records = [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"b", None), (b"c", b"1")]
    produce_and_wait(Producer({"bootstrap.servers": kafka_bootstrap}),
                     [(topic, k, v, 0) for k, v in records])  # fmt: skip
    got = _read_all(kafka_bootstrap, topic, len(records))
    assert [(m.key(), m.value()) for m in got] == records
    last = {m.key(): m.value() for m in got}
    assert last == {b"a": b"2", b"b": None, b"c": b"1"}


def test_compacted_topic_refuses_records_without_a_key(kafka_bootstrap, create_topic) -> None:
    topic = create_topic(1, config={"cleanup.policy": "compact"})
    errors: list = []
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "retries": 0})
    producer.produce(topic, value=b"no key", partition=0,
                     on_delivery=lambda err, msg: errors.append(err))  # fmt: skip
    assert producer.flush(30) == 0
    assert len(errors) == 1 and errors[0] is not None, errors
    assert errors[0].code() == KafkaError.INVALID_RECORD, errors[0]
