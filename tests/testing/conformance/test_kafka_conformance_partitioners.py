"""librdkafka's keyed partitioners place records where _kafka/partitioners.py says (conformance)."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from kafka_conformance_helpers import produce_and_wait

from airflow_samza_expand._kafka.partitioners import crc32_partition, murmur2_partition

KEYS = [f"key-{i}".encode() for i in range(300)] + [b"a", b"\x00\xff", "ключ".encode()]


@pytest.mark.parametrize(
    ("partitioner", "expected"),
    [("consistent_random", crc32_partition), ("murmur2_random", murmur2_partition)],
)
@pytest.mark.parametrize("partitions", [3, 8])
def test_keyed_records_land_on_the_hashed_partition(
    kafka_bootstrap, create_topic, partitioner, expected, partitions
) -> None:
    topic = create_topic(partitions)
    producer = Producer(
        {"bootstrap.servers": kafka_bootstrap, "partitioner": partitioner, "linger.ms": 5}
    )
    delivered = produce_and_wait(producer, [(topic, k, b"v") for k in KEYS])
    placed = {m.key(): m.partition() for m in delivered}
    assert len(placed) == len(KEYS)
    wrong = {k: p for k, p in placed.items() if p != expected(k, partitions)}
    assert not wrong, f"{len(wrong)} keys misplaced, e.g. {list(wrong.items())[:3]}"
    assert len(set(placed.values())) == partitions  # the keys spread over every partition
