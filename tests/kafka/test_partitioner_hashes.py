"""Partitioner hashes against Kafka's published vectors and librdkafka itself."""

from __future__ import annotations

import ctypes
import os
import random
import zlib
from pathlib import Path

import pytest

from airflow_samza_expand._kafka.partitioners import (
    PARTITIONERS,
    crc32_partition,
    murmur2,
    murmur2_partition,
    to_positive,
)

# Kafka clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java, testMurmur2.
KAFKA_MURMUR2_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (bytes([ord("a"), ord("b"), ord("c")]), 479470107),
]


@pytest.mark.parametrize(("data", "expected"), KAFKA_MURMUR2_VECTORS)
def test_murmur2_matches_kafka_utils_test(data, expected):
    assert murmur2(data) == expected


def test_murmur2_is_a_signed_32_bit_int_and_to_positive_clears_the_sign():
    values = [murmur2(os.urandom(n)) for n in range(64)]
    assert all(-(2**31) <= v < 2**31 for v in values)
    assert any(v < 0 for v in values)
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    assert to_positive(5) == 5


def test_java_default_partitioner_formula():
    for key, expected_hash in KAFKA_MURMUR2_VECTORS:
        for n in (1, 2, 3, 8, 12, 1024):
            assert murmur2_partition(key, n) == (expected_hash & 0x7FFFFFFF) % n


def test_crc32_is_standard_crc32():
    assert crc32_partition(b"123456789", 2**31) == 0xCBF43926 % 2**31  # CRC-32 check value
    assert crc32_partition(b"orders-1", 7) == zlib.crc32(b"orders-1") % 7


def test_registry_and_bad_counts():
    assert {"murmur2": murmur2_partition, "crc32": crc32_partition} == PARTITIONERS
    for partition in PARTITIONERS.values():
        with pytest.raises(ValueError, match="positive"):
            partition(b"k", 0)


def _librdkafka() -> ctypes.CDLL:
    import confluent_kafka

    site = Path(confluent_kafka.__file__).resolve().parents[1]
    candidates = sorted(site.glob("confluent_kafka.libs/librdkafka*.so*"))
    if not candidates:
        pytest.skip("confluent_kafka wheel has no bundled librdkafka to compare with")
    return ctypes.CDLL(str(candidates[0]))


@pytest.mark.parametrize(
    ("symbol", "ours"),
    [
        ("rd_kafka_msg_partitioner_consistent_random", crc32_partition),
        ("rd_kafka_msg_partitioner_murmur2", murmur2_partition),
    ],
)
def test_same_partition_as_librdkafka(symbol, ours):
    """librdkafka's own partitioner functions (bundled with confluent-kafka) agree with ours."""
    function = getattr(_librdkafka(), symbol)
    function.restype = ctypes.c_int32
    function.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.c_int32,
        ctypes.c_void_p,
        ctypes.c_void_p,
    ]
    rng = random.Random(7)
    for _ in range(3000):
        key = rng.randbytes(rng.randint(1, 40))
        n = rng.randint(1, 1024)
        assert function(None, key, len(key), n, None, None) == ours(key, n)
