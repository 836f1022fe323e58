"""High watermarks, list_offsets, out-of-range fetch and group offsets (conformance)."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import OffsetSpec
from kafka_conformance_helpers import consume, produce_and_wait


def _producer(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})


def test_high_watermarks_after_produce(kafka_bootstrap, create_topic) -> None:
    topic = create_topic(3)
    counts = {0: 5, 1: 0, 2: 12}
    records = [(topic, None, b"v%d" % i, p) for p, n in counts.items() for i in range(n)]
    produce_and_wait(_producer(kafka_bootstrap), records)
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "wm"})
    try:
        for p, n in counts.items():
            assert consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) == (0, n)
    finally:
        consumer.close()


def test_delivered_offsets_are_consecutive(kafka_bootstrap, create_topic) -> None:
    topic = create_topic(1)
    delivered = produce_and_wait(
        _producer(kafka_bootstrap), [(topic, None, b"%d" % i, 0) for i in range(100)]
    )
    assert [m.offset() for m in delivered] == list(range(100))


def test_list_offsets_earliest_latest_and_by_timestamp(
    admin, kafka_bootstrap, create_topic
) -> None:
    topic = create_topic(1)
    producer = _producer(kafka_bootstrap)
    base = int(time.time() * 1000) - 60_000
    for i in range(10):
        producer.produce(topic, value=b"%d" % i, partition=0, timestamp=base + i * 1000)
    assert producer.flush(30) == 0
    tp = TopicPartition(topic, 0)
    specs = {
        "earliest": OffsetSpec.earliest(),
        "latest": OffsetSpec.latest(),
        "ts": OffsetSpec.for_timestamp(base + 4500),
        "future": OffsetSpec.for_timestamp(base + 3_600_000),
    }
    results = {name: admin.list_offsets({tp: spec})[tp].result() for name, spec in specs.items()}
    assert results["earliest"].offset == 0
    assert results["latest"].offset == 10
    assert results["ts"].offset == 5
    assert results["ts"].timestamp == base + 5000
    assert results["future"].offset == -1

    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "times"})
    try:
        found = consumer.offsets_for_times([TopicPartition(topic, 0, base + 2000)], timeout=10)
        assert found[0].offset == 2
    finally:
        consumer.close()


def test_fetch_past_the_end_resets_per_policy(kafka_bootstrap, create_topic) -> None:
    topic = create_topic(1)
    produce_and_wait(_producer(kafka_bootstrap), [(topic, None, b"%d" % i, 0) for i in range(5)])
    consumer = Consumer(
        {"bootstrap.servers": kafka_bootstrap, "group.id": "oor", "auto.offset.reset": "earliest"}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 1000)])  # out of range
        got = consume(consumer, 5)
        assert [m.offset() for m in got] == [0, 1, 2, 3, 4]
    finally:
        consumer.close()


def test_group_offsets_via_consumer_and_admin(
    admin, kafka_bootstrap, create_topic, unique_topic
) -> None:
    topic = create_topic(2)
    group = unique_topic("group")
    consumer = Consumer(
        {"bootstrap.servers": kafka_bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        consumer.commit(
            offsets=[TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 9)], asynchronous=False
        )
        committed = consumer.committed(
            [TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10
        )
        assert [(c.partition, c.offset) for c in committed] == [(0, 3), (1, 9)]
    finally:
        consumer.close()

    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    )
    listed = admin.list_consumer_group_offsets([request])[group].result()
    assert sorted((tp.partition, tp.offset) for tp in listed.topic_partitions) == [(0, 3), (1, 9)]

    everything = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    all_tps = everything[group].result().topic_partitions
    assert sorted((tp.topic, tp.partition, tp.offset) for tp in all_tps) == [
        (topic, 0, 3),
        (topic, 1, 9),
    ]


def test_uncommitted_partition_reads_as_no_offset(
    kafka_bootstrap, create_topic, unique_topic
) -> None:
    topic = create_topic(1)
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": unique_topic("g")})
    try:
        committed = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        assert committed[0].offset < 0  # OFFSET_INVALID
    finally:
        consumer.close()


def test_delete_consumer_group_removes_its_offsets(
    admin, kafka_bootstrap, create_topic, unique_topic
) -> None:
    topic = create_topic(1)
    group = unique_topic("gone")
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)
    consumer.close()
    for fut in admin.delete_consumer_groups([group], request_timeout=30).values():
        fut.result()
    listed = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])]
    )[group].result()
    assert [tp.offset for tp in listed.topic_partitions] == [-1001]  # OFFSET_INVALID
