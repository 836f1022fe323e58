"""A producer that keeps producing while its topic grows uses the new partitions after its
metadata refresh, and keys follow hash(key) % new count from then on (conformance)."""

from __future__ import annotations

import time

from confluent_kafka import Producer
from confluent_kafka.admin import NewPartitions
from kafka_conformance_helpers import wait_for_partitions

from airflow_samza_expand._kafka.partitioners import murmur2_partition


def test_producer_picks_up_new_partitions(admin, kafka_bootstrap, create_topic) -> None:
    topic = create_topic(2)
    producer = Producer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "partitioner": "murmur2_random",
            "topic.metadata.refresh.interval.ms": 500,
            "linger.ms": 5,
        }
    )
    placed: dict[int, int] = {}  # produce sequence -> partition
    errors: list = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(err)
            return
        placed[int(msg.value())] = msg.partition()

    keys: list[bytes] = []

    def produce_some(n: int) -> None:
        for _ in range(n):
            seq = len(keys)
            keys.append(b"user-%d" % (seq % 97))
            producer.produce(
                topic,
                key=keys[-1],
                value=b"%d" % seq,
                on_delivery=on_delivery,
            )
        assert producer.flush(30) == 0
        assert not errors, errors

    produce_some(200)
    assert set(placed.values()) == {0, 1}
    for fut in admin.create_partitions([NewPartitions(topic, 4)]).values():
        fut.result()
    wait_for_partitions(admin, topic, 4)

    deadline = time.monotonic() + 60
    while not any(p >= 2 for p in placed.values()):
        assert time.monotonic() < deadline, "producer never used the new partitions"
        produce_some(20)
        time.sleep(0.1)
    produce_some(200)
    first_new = min(seq for seq, p in placed.items() if p >= 2)
    for seq, partition in placed.items():
        if seq < 200:
            assert partition == murmur2_partition(keys[seq], 2)
        elif seq >= first_new:
            assert partition == murmur2_partition(keys[seq], 4), seq
        else:
            assert partition in (murmur2_partition(keys[seq], 2), murmur2_partition(keys[seq], 4))
