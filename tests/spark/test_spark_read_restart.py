"""The executor's read of a split (`spark._source_read.read_ranges`) across a restart of Apache
Kafka on its data directory, with the Python worker's pooled consumer from before it: the read
gets every record of its ranges once the broker is back. And a client the restarted broker
never serves again - the fault matrix's ``broker/in-place/between`` once ("no records for 120s
while reading [(..., 0)]", the batch and the query failed) - is left for a new client from the
offsets the read reached, so the read ends instead of waiting out its stall timeout. That
client is a stand-in (its ``consume`` returns nothing): the real broker did it once in the
matrix and not again in this file's real restarts. And a pooled consumer asks for the metadata
of partitions a growth added before it is assigned them (without it the client waits for its
next metadata refresh first). Driven directly, no Spark."""

from __future__ import annotations

import threading
import time

import pytest
from spark_helpers import create_topic, grow_topic, new_topic_name, produce_sequenced

from airflow_samza_expand.spark import _source_read
from airflow_samza_expand.spark._source import SOURCE_SCHEMA

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

PARTITIONS = 4
KEYS = [f"key-{i}" for i in range(20)]
STALL_S = 60.0  # the read's stall timeout here: well past the client refresh, short of 120 s


def watermarks(
    bootstrap: str, topic: str, partitions: int = PARTITIONS
) -> list[tuple[str, int, int, int]]:
    """Each partition's whole log as a range ``(topic, partition, 0, high)``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        highs = [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(partitions)
        ]
    finally:
        consumer.close()
    return [(topic, p, 0, high) for p, high in enumerate(highs)]


def read_all(options: dict, ranges: list) -> list[tuple[int, int]]:
    """The (partition, offset) of every record ``read_ranges`` yields for ``ranges``."""
    got = []
    for batch in _source_read.read_ranges(options, "restart-group", "Partition 0", ranges,
                                          SOURCE_SCHEMA):  # fmt: skip
        got += zip(batch.column("partition").to_pylist(), batch.column("offset").to_pylist(),
                   strict=True)  # fmt: skip
    return got


def test_a_pooled_consumer_reads_its_ranges_across_a_broker_restart(
    restartable_apache_kafka, monkeypatch
) -> None:
    broker = restartable_apache_kafka
    monkeypatch.setattr(_source_read, "READ_STALL_TIMEOUT_S", STALL_S)
    monkeypatch.setattr(_source_read, "_IDLE", {})  # this test's pool only
    topic = new_topic_name("orders")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    produce_sequenced(broker.bootstrap, topic, KEYS, 5)
    options = {"bootstrap_servers": broker.bootstrap}
    first = watermarks(broker.bootstrap, topic)
    assert len(read_all(options, first)) == len(KEYS) * 5  # the consumer is pooled now
    assert sum(len(idle) for idle in _source_read._IDLE.values()) == 1
    produce_sequenced(broker.bootstrap, topic, KEYS, 5)
    ranges = [(t, p, end, high) for (t, p, _s, end), (_t, _p, _z, high)
              in zip(first, watermarks(broker.bootstrap, topic), strict=True)]  # fmt: skip
    expected = sorted((p, o) for _t, p, s, e in ranges for o in range(s, e))
    got: list = []
    failed: list = []
    started = time.monotonic()
    broker.stop()  # SIGTERM; started again below on the same ports and data directory

    def read() -> None:
        try:
            got.extend(read_all(options, ranges))
        except Exception as exc:  # noqa: BLE001 - reported below
            failed.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(3.0)  # the read assigned its ranges to the pooled consumer meanwhile
    broker.start()
    reader.join(STALL_S + 30)
    assert not reader.is_alive()
    print(f"[read across a restart] {len(got)} records in {time.monotonic() - started:.1f}s")
    assert not failed, failed
    assert sorted(got) == expected


class Unserved:
    """A consumer the brokers no longer serve: assigned as asked, it never returns a record."""

    def __init__(self, consumer) -> None:
        self.consumer = consumer
        self.closed = False

    def assign(self, partitions) -> None:
        self.consumer.assign(partitions)

    def consume(self, num_messages: int, timeout: float) -> list:
        time.sleep(min(timeout, 0.2))
        return []

    def close(self) -> None:
        self.closed = True
        self.consumer.close()


def test_a_read_whose_client_gets_nothing_goes_on_with_a_new_client(
    kafka_bootstrap, monkeypatch, caplog
) -> None:
    monkeypatch.setattr(_source_read, "READ_STALL_TIMEOUT_S", 20.0)
    monkeypatch.setattr(_source_read, "READ_CLIENT_REFRESH_S", 2.0, raising=False)
    unserved: list[Unserved] = []

    def take(config, make):
        unserved.append(Unserved(make(dict(config))))
        return unserved[-1]

    monkeypatch.setattr(_source_read, "_take_consumer", take)
    monkeypatch.setattr(_source_read, "_IDLE", {})
    topic = new_topic_name("orders")
    create_topic(kafka_bootstrap, topic, PARTITIONS)
    produce_sequenced(kafka_bootstrap, topic, KEYS, 5)
    ranges = watermarks(kafka_bootstrap, topic)
    with caplog.at_level("WARNING", logger="airflow_samza_expand.spark._source_read"):
        got = read_all({"bootstrap_servers": kafka_bootstrap}, ranges)
    assert sorted(got) == sorted((p, o) for _t, p, s, e in ranges for o in range(s, e))
    assert [u.closed for u in unserved] == [True]  # left, closed, never pooled
    assert "asking again through a new Kafka client from the offsets reached" in caplog.text
    assert sum(len(idle) for idle in _source_read._IDLE.values()) == 1  # the new one, pooled


class Recording:
    """A consumer that records its metadata requests and assignments, in order."""

    def __init__(self, consumer, calls: list) -> None:
        self.consumer, self.calls = consumer, calls

    def list_topics(self, topic=None, timeout: float = -1):
        self.calls.append(("metadata", topic))
        return self.consumer.list_topics(topic, timeout=timeout)

    def assign(self, partitions) -> None:
        self.calls.append(("assign", sorted(tp.partition for tp in partitions)))
        self.consumer.assign(partitions)

    def __getattr__(self, name: str):
        return getattr(self.consumer, name)


def test_a_pooled_consumer_asks_for_the_partitions_a_growth_added_before_reading_them(
    kafka_bootstrap, monkeypatch
) -> None:
    from airflow_samza_expand._kafka.clients import Consumer

    calls: list = []
    take = _source_read._take_consumer
    monkeypatch.setattr(_source_read, "_IDLE", {})

    def recording(config, _make):
        return take(config, lambda c: Recording(Consumer(c), calls))

    monkeypatch.setattr(_source_read, "_take_consumer", recording)
    topic = new_topic_name("grown")
    create_topic(kafka_bootstrap, topic, 2)
    produce_sequenced(kafka_bootstrap, topic, KEYS, 2)
    options = {"bootstrap_servers": kafka_bootstrap}
    old = watermarks(kafka_bootstrap, topic, 2)
    read_all(options, old)
    grow_topic(kafka_bootstrap, topic, PARTITIONS)
    produce_sequenced(kafka_bootstrap, topic, KEYS, 2, first_seq={k: 2 for k in KEYS})
    grown = [r for r in watermarks(kafka_bootstrap, topic) if r[1] >= 2]
    assert all(high > 0 for _t, _p, _s, high in grown)
    got = read_all(options, grown)
    assert sorted(got) == sorted((p, o) for _t, p, s, e in grown for o in range(s, e))
    read_all(options, grown)  # partitions it knows now: no metadata request
    assert calls == [
        ("metadata", topic), ("assign", [0, 1]),  # a new consumer: its first look
        ("metadata", topic), ("assign", [2, 3]),  # the pooled one, before the new partitions
        ("assign", [2, 3]),
    ]  # fmt: skip
