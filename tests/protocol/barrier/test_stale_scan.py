"""The stale-placement scan on a real broker: a producer that keeps the old count is caught with
exact offsets and keys; fresh producers (real confluent-kafka default partitioners) never are."""

from __future__ import annotations

import pytest
from kafka_test_data import produce

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand._kafka.partitioners import PARTITIONERS
from airflow_samza_expand._protocol.barrier.reads import snapshot_barrier
from airflow_samza_expand._protocol.barrier.stale_scan import (
    StaleScanner,
    resolve_partitioners,
    scan_until_caught_up,
)

# librdkafka's name of the partitioner each of our hashes reproduces
LIBRDKAFKA = {"crc32": "consistent_random", "murmur2": "murmur2_random"}
KEYS = [f"user-{i}".encode() for i in range(40)]


@pytest.fixture
def config(kafka_bootstrap):
    return client_config(kafka_bootstrap)


@pytest.fixture
def admin(config):
    admin = KafkaAdmin(config, timeout_s=15)
    yield admin
    admin.close()


def _grown_topic(config, admin, unique_topic, name):
    """A 2-partition topic with pre-expansion traffic, grown to 4; (topic, expansion offsets)."""
    topic = unique_topic("orders")
    admin.ensure_topic(topic, 2)
    hash_ = PARTITIONERS[name]
    produce(config, topic, [(k, b"before", hash_(k, 2)) for k in KEYS])
    at_expansion = snapshot_barrier(admin, {topic: 2})
    admin.create_partitions(topic, 4)
    return topic, at_expansion


@pytest.mark.parametrize("name", sorted(PARTITIONERS))
def test_stale_producer_is_caught_with_exact_offsets_and_keys(config, admin, unique_topic, name):
    topic, start = _grown_topic(config, admin, unique_topic, name)
    hash_ = PARTITIONERS[name]
    # a fresh producer: the client's own default partitioner, metadata says 4 partitions
    produce(config, topic, [(k, b"fresh", None) for k in KEYS], partitioner=LIBRDKAFKA[name])
    # a stale producer still places with the old count (hash % 2)
    stale_keys = KEYS[:12]
    produce(config, topic, [(k, b"stale", hash_(k, 2)) for k in stale_keys])
    marks = admin.high_watermarks({topic: range(2)})[topic]

    expected = []
    offsets = {p: marks[p] - sum(1 for k in stale_keys if hash_(k, 2) == p) for p in range(2)}
    for key in stale_keys:
        p = hash_(key, 2)
        if hash_(key, 4) != p:
            expected.append((p, offsets[p], key.decode(), hash_(key, 4)))
        offsets[p] += 1
    assert expected, "the key set must contain moved keys"

    with StaleScanner(config, {topic: (2, 4)}, name, timeout_s=15) as scanner:
        result = scan_until_caught_up(scanner, start)
    found = sorted((s.partition, s.offset, s.key, s.expected_partition) for s in result.placements)
    assert found == sorted(expected)
    assert {s.topic for s in result.placements} == {topic}
    assert result.positions == {topic: marks}
    # every record after the expansion in the old partitions was checked, no more
    fresh_in_old = sum(1 for k in KEYS if hash_(k, 4) < 2)
    assert result.records_read == fresh_in_old + len(stale_keys)


def test_fresh_producers_only_give_no_stale_placement(config, admin, unique_topic):
    topic, start = _grown_topic(config, admin, unique_topic, "crc32")
    produce(config, topic, [(k, b"fresh", None) for k in KEYS * 3])
    produce(config, topic, [(None, b"keyless", p) for p in range(4)])
    with StaleScanner(config, {topic: (2, 4)}, "crc32", timeout_s=15) as scanner:
        result = scan_until_caught_up(scanner, start)
    assert result.placements == ()
    assert result.records_read > 0 and result.caught_up


def test_records_before_the_expansion_offsets_are_not_read(config, admin, unique_topic):
    """Pre-expansion traffic was placed with 2 partitions (moved keys included): not stale."""
    topic, start = _grown_topic(config, admin, unique_topic, "crc32")
    with StaleScanner(config, {topic: (2, 4)}, "crc32", timeout_s=15) as scanner:
        assert scanner.poll(start).placements == ()
        # scanning from offset 0 instead would flag those moved keys: the start offsets matter
        from_zero = scan_until_caught_up(scanner, {topic: {0: 0, 1: 0}})
    assert len(from_zero.placements) == sum(1 for k in KEYS if PARTITIONERS["crc32"](k, 4) >= 2)


def test_bounded_polls_resume_to_the_same_result(config, admin, unique_topic):
    topic, start = _grown_topic(config, admin, unique_topic, "crc32")
    crc = PARTITIONERS["crc32"]
    produce(config, topic, [(k, b"stale", crc(k, 2)) for k in KEYS])
    with StaleScanner(config, {topic: (2, 4)}, "crc32", timeout_s=15) as whole:
        one = scan_until_caught_up(whole, start)
    with StaleScanner(config, {topic: (2, 4)}, "crc32", max_records=7, timeout_s=15) as small:
        positions, found, polls = start, [], 0
        while True:
            result = small.poll(positions)
            polls += 1
            assert result.records_read <= 7
            found.extend(result.placements)
            positions = result.positions
            if result.caught_up:
                break
    assert polls >= len(KEYS) // 7
    assert sorted(found) == sorted(one.placements)
    assert positions == one.positions


def test_idle_poll_costs_one_request_and_no_consumer(config, admin, unique_topic):
    topic, start = _grown_topic(config, admin, unique_topic, "crc32")
    with StaleScanner(config, {topic: (2, 4)}, "crc32", admin=admin) as scanner:
        for _ in range(3):
            result = scanner.poll(start)
            assert (result.requests, result.records_read, result.placements) == (1, 0, ())
            assert result.caught_up
        assert scanner._consumer is None  # nothing appended: nothing fetched


def test_until_bounds_the_checked_range(config, admin, unique_topic):
    topic, start = _grown_topic(config, admin, unique_topic, "crc32")
    crc = PARTITIONERS["crc32"]
    moved = [k for k in KEYS if crc(k, 4) != crc(k, 2)]
    produce(config, topic, [(k, b"stale", crc(k, 2)) for k in moved])
    with StaleScanner(config, {topic: (2, 4)}, "crc32", timeout_s=15) as scanner:
        result = scanner.poll(start, until=start)
        assert result.records_read == 0 and result.placements == ()
        first = {topic: {p: o + 1 for p, o in start[topic].items()}}
        result = scanner.poll(start, until=first)
    assert result.records_read == 2 and len(result.placements) == 2
    assert result.positions == first


def test_bad_input_is_named(config, admin, unique_topic):
    topic, start = _grown_topic(config, admin, unique_topic, "crc32")
    with pytest.raises(ValueError, match="unknown partitioner 'xxhash'"):
        StaleScanner(config, {topic: (2, 4)}, "xxhash", admin=admin)
    with pytest.raises(ValueError, match="power-of-two"):
        StaleScanner(config, {topic: (2, 6)}, "crc32", admin=admin)
    with StaleScanner(config, {topic: (2, 4)}, "crc32", admin=admin) as scanner:
        with pytest.raises(ValueError, match=r"lacks old partition\(s\) \[1\]"):
            scanner.poll({topic: {0: 0}})
        with pytest.raises(ValueError, match="no offsets for topic"):
            scanner.poll({})


def test_undetected_partitioner_means_both_candidates():
    assert len(resolve_partitioners(None)) == 2 == len(resolve_partitioners([]))
    assert resolve_partitioners("murmur2") == (PARTITIONERS["murmur2"],)
