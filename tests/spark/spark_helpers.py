"""Kafka helpers of the Spark tests: topics, sequenced producers, output and offset readers."""

from __future__ import annotations

import json
import uuid
from typing import Any


def new_topic_name(prefix: str) -> str:
    """A collision-free topic name."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def grow_topic(bootstrap: str, topic: str, total: int) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions(topic, total)])[topic].result(30)


def produce_sequenced(
    bootstrap: str,
    topic: str,
    keys: list[str],
    per_key: int,
    first_seq: dict[str, int] | None = None,
) -> dict[str, int]:
    """Produce ``per_key`` records for each key (interleaved), value {"seq": n}, with the
    default (CRC32 % N) partitioner of a fresh producer. Returns the next seq of each key."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    seqs = dict(first_seq or {k: 0 for k in keys})
    errors: list[Any] = []
    for _ in range(per_key):
        for key in keys:
            value = json.dumps({"seq": seqs[key], "key": key}).encode()
            producer.produce(
                topic,
                key=key.encode(),
                value=value,
                on_delivery=lambda e, m: e and errors.append(e),
            )
            seqs[key] += 1
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not errors, errors
    return seqs


def produce_raw(bootstrap: str, topic: str, records: list[tuple[int, str, dict]]) -> None:
    """Produce (partition, key, value-dict) records to explicit partitions, in list order."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, key, value in records:
        producer.produce(
            topic, key=key.encode(), value=json.dumps(value).encode(), partition=partition
        )
    assert producer.flush(30) == 0


def read_latest_outputs(bootstrap: str, topic: str) -> dict[str, dict]:
    """Every record of ``topic`` from the start; the last JSON value per key."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "enable.auto.commit": "false",
            "enable.partition.eof": "true",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        parts = sorted(meta.partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        pending = set(parts)
        latest: dict[str, dict] = {}
        while pending:
            msg = consumer.poll(10)
            assert msg is not None, f"timed out reading {topic}, partitions {pending} unfinished"
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                pending.discard(msg.partition())
                continue
            latest[msg.key().decode()] = json.loads(msg.value())
        return latest
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        consumer.close()


def put_expansion_record(store, topic: str, barrier: dict, partitioner: str = "crc32") -> None:
    """The record of expansion ``topic`` 2 -> 4 (v1 -> v2) with its barrier snapshot and the
    partitioner the plan detected, in a typed store."""
    from airflow_samza_expand.core._clock import now_iso
    from airflow_samza_expand.core._record import ExpansionRecord

    stamp = now_iso()
    store.put_expansion(
        ExpansionRecord(
            expansion_id="job~in.2-4", job_name="job", base_version=1, target_version=2,
            plan={"counts_before": {topic: 2}, "counts_after": {topic: 4}}, status="expanded",
            owner="test", created_at=stamp, updated_at=stamp, barrier=barrier,
            results={"plan": {"conformance": {topic: {"partitioner": partitioner}}}},
        ),
        expected_revision=0,
    )  # fmt: skip


def planned_growth(job_name: str, topic: str, expansion_id: str) -> Any:
    """A planned 2 -> 4 expansion record of ``topic`` (crc32 detected), job model v1 -> v2."""
    from airflow_samza_expand.core._clock import now_iso
    from airflow_samza_expand.core._record import ExpansionRecord

    stamp = now_iso()
    return ExpansionRecord(
        expansion_id=expansion_id, job_name=job_name, base_version=1, target_version=2,
        plan={"counts_before": {topic: 2}, "counts_after": {topic: 4}},
        status="planned", owner="test", created_at=stamp, updated_at=stamp,
        results={"plan": {"conformance": {topic: {"partitioner": "crc32"}}}},
    )  # fmt: skip


def mark_grown(store: Any, expansion_id: str) -> None:
    """Record the expand step as done (what the expand step stores after CreatePartitions)."""
    from airflow_samza_expand.core._clock import now_iso

    record = store.get_expansion(expansion_id)
    stamp = now_iso()
    grown = record.with_step("expand", started_at=stamp, ended_at=stamp)
    store.put_expansion(grown, expected_revision=record.revision)
