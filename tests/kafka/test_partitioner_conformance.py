"""Partitioner conformance: crc32-, murmur2- and custom-partitioned topics, unkeyed topics."""

from __future__ import annotations

import pytest
from kafka_test_data import produce

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand._kafka.conformance import check_conformance, classify_samples
from airflow_samza_expand._kafka.partitioners import crc32_partition, murmur2_partition
from airflow_samza_expand.core.errors import PartitionerMismatchError, UnknownTopicError

KEYS = [f"user-{i}".encode() for i in range(200)]


@pytest.fixture
def config(kafka_bootstrap):
    return client_config(kafka_bootstrap)


def _topic(config, unique_topic, partitions):
    topic = unique_topic("conf")
    KafkaAdmin(config, timeout_s=15).ensure_topic(topic, partitions)
    return topic


def test_crc32_topic_from_librdkafka_default(config, unique_topic):
    topic = _topic(config, unique_topic, 6)
    produce(config, topic, [(k, b"v", None) for k in KEYS])  # consistent_random = CRC32
    result = check_conformance(config, topic).raise_if_mismatch()
    assert result.partitioner == "crc32" and result.matching == ("crc32",)
    assert result.keyed_records == len(KEYS) and not result.offenders
    assert result.to_dict()["conformant"] is True


def test_murmur2_topic_from_java_compatible_partitioner(config, unique_topic):
    topic = _topic(config, unique_topic, 6)
    produce(config, topic, [(k, b"v", None) for k in KEYS], partitioner="murmur2_random")
    result = check_conformance(config, topic).raise_if_mismatch()
    assert result.partitioner == "murmur2"
    assert result.explained["murmur2"] == len(KEYS) > result.explained["crc32"]


def test_custom_partitioner_is_refused_with_offenders(config, unique_topic):
    topic = _topic(config, unique_topic, 6)
    produce(config, topic, [(k, b"v", (crc32_partition(k, 6) + 1) % 6) for k in KEYS])
    result = check_conformance(config, topic)
    assert result.partitioner is None and not result.conformant
    assert 0 < len(result.offenders) <= 5
    offender = result.offenders[0]
    assert offender.expected == {
        "murmur2": murmur2_partition(offender.key, 6),
        "crc32": crc32_partition(offender.key, 6),
    }
    assert offender.partition not in (offender.expected["crc32"],)
    with pytest.raises(PartitionerMismatchError) as info:
        result.raise_if_mismatch()
    message = str(info.value)
    assert topic in message and "murmur2 ->" in message and "crc32 ->" in message
    assert "in partition" in message


def test_mixed_partitioners_are_refused(config, unique_topic):
    topic = _topic(config, unique_topic, 4)
    produce(config, topic, [(k, b"v", None) for k in KEYS[:100]])
    produce(config, topic, [(k, b"v", None) for k in KEYS[100:]], partitioner="murmur2_random")
    result = check_conformance(config, topic)
    assert result.partitioner is None
    with pytest.raises(PartitionerMismatchError):
        result.raise_if_mismatch()


def test_unkeyed_topic_is_conformant_by_default_with_flag(config, unique_topic):
    topic = _topic(config, unique_topic, 3)
    produce(config, topic, [(None, b"v", p % 3) for p in range(30)])
    result = check_conformance(config, topic).raise_if_mismatch()
    assert result.no_keyed_records and result.conformant and result.partitioner is None
    assert result.records_sampled == 30 and result.keyed_records == 0


def test_empty_topic_is_conformant_by_default(config, unique_topic):
    topic = _topic(config, unique_topic, 2)
    result = check_conformance(config, topic)
    assert result.no_keyed_records and result.records_sampled == 0


def test_sampling_is_bounded_and_from_the_end(config, unique_topic):
    topic = _topic(config, unique_topic, 2)
    # old records from a custom partitioner, then 40 conforming records per partition
    produce(config, topic, [(k, b"v", (crc32_partition(k, 2) + 1) % 2) for k in KEYS[:50]])
    tail = [k for k in KEYS if crc32_partition(k, 2) == 0][:40]
    tail += [k for k in KEYS if crc32_partition(k, 2) == 1][:40]
    produce(config, topic, [(k, b"v", None) for k in tail])
    result = check_conformance(config, topic, sample_per_partition=10, max_scan_per_partition=40)
    assert result.partitioner == "crc32"  # the old custom records are beyond the scan
    assert result.keyed_records == 20 and result.records_sampled == 80
    wider = check_conformance(config, topic, sample_per_partition=100, max_scan_per_partition=500)
    assert wider.partitioner is None  # reading further back finds them


def test_records_from_before_an_earlier_expansion(config, unique_topic):
    topic = _topic(config, unique_topic, 2)
    produce(config, topic, [(k, b"v", None) for k in KEYS[:100]])
    KafkaAdmin(config, timeout_s=15).create_partitions(topic, 4)
    produce(config, topic, [(k, b"v", None) for k in KEYS[100:]])  # fresh producer: 4 partitions
    strict = check_conformance(config, topic)
    assert strict.partitioner is None  # half the old keys sit at crc32 % 2, not % 4
    aware = check_conformance(config, topic, earlier_counts=[2])
    assert aware.partitioner == "crc32" and aware.counts_considered == (4, 2)


def test_unknown_topic(config, unique_topic):
    with pytest.raises(UnknownTopicError):
        check_conformance(config, unique_topic("missing"))


def test_classify_samples_single_partition_is_ambiguous_but_conformant():
    result = classify_samples("t", 1, [(b"a", 0, 0), (b"b", 0, 1)])
    assert result.matching == ("murmur2", "crc32") and result.conformant
