"""Producing and committing helpers of the Airflow-surface tests (real confluent-kafka clients)."""

from __future__ import annotations

import zlib
from collections.abc import Mapping

from confluent_kafka import Consumer, Producer, TopicPartition


def produce_keyed(
    config: Mapping[str, str],
    topic: str,
    n: int,
    *,
    prefix: str = "key",
    partition_count: int | None = None,
    misplace: bool = False,
) -> None:
    """Produce ``n`` keyed records with librdkafka's default partitioner (CRC32 of the key), or,
    with ``misplace``, each at ``crc32(key) + 1 mod N`` - what a custom partitioner might do."""
    producer = Producer({**config, "linger.ms": 5})
    for i in range(n):
        key = f"{prefix}-{i}".encode()
        if misplace:
            assert partition_count is not None
            partition = (zlib.crc32(key) + 1) % partition_count
            producer.produce(topic, key=key, value=b"v", partition=partition)
        else:
            producer.produce(topic, key=key, value=b"v")
        producer.poll(0)
    assert producer.flush(30) == 0, "records not delivered"


def commit_offsets(
    config: Mapping[str, str], group: str, topic: str, offsets: Mapping[int, int]
) -> None:
    """Commit ``offsets`` (partition -> next offset to read) for consumer group ``group``."""
    consumer = Consumer(
        {
            **config,
            "group.id": group,
            "enable.auto.commit": "false",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in sorted(offsets.items())],
            asynchronous=False,
        )
    finally:
        consumer.close()
