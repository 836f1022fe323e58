"""The two default Kafka key partitioners, as pure functions (no client library needed).

* ``murmur2``: the Java client's default partitioner for keyed records,
  ``Utils.toPositive(Utils.murmur2(keyBytes)) % numPartitions`` (librdkafka's
  ``murmur2``/``murmur2_random`` partitioners compute the same).
* ``crc32``: librdkafka's default ``consistent_random`` partitioner for keyed records,
  ``rd_crc32(key) % partition_cnt`` (the standard CRC-32, as ``zlib.crc32``). librdkafka sends
  records with a NULL or empty key (``keylen == 0``) to a random partition instead; such records
  have no fixed place and cannot be checked (its ``consistent`` partitioner would put them at
  ``crc32(b"") % n == 0``, which is what :func:`crc32_partition` returns for ``b""``).

Both put a key at ``hash(key) % N``, so after growth from ``N`` to ``N * 2**k`` a key of partition
``p`` moves to some ``p + i * N``: the property the SEP-5 fixed-task mapping relies on.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

_MASK32 = 0xFFFFFFFF
_M = 0x5BD1E995
_SEED = 0x9747B28C
_R = 24


def _signed32(n: int) -> int:
    n &= _MASK32
    return n - 0x100000000 if n & 0x80000000 else n


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: 32-bit MurmurHash2 (seed 0x9747b28c) as a signed Java int."""
    data = bytes(data)
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    whole = length & ~3
    for (k,) in struct.iter_unpack("<I", data[:whole]):
        k = (k * _M) & _MASK32
        k ^= k >> _R
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    tail = length & 3
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return _signed32(h)


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit of a 32-bit int (``n & 0x7fffffff``)."""
    return n & 0x7FFFFFFF


def _check_count(num_partitions: int) -> None:
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, int):
        raise TypeError(f"num_partitions must be an int, got {num_partitions!r}")
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be a positive integer, got {num_partitions}")


def murmur2_partition(key: bytes, num_partitions: int) -> int:
    """Partition of a keyed record under the Java client's default partitioner."""
    _check_count(num_partitions)
    return to_positive(murmur2(key)) % num_partitions


def crc32_partition(key: bytes, num_partitions: int) -> int:
    """Partition of a keyed record under librdkafka's default ``consistent_random``."""
    _check_count(num_partitions)
    return zlib.crc32(bytes(key)) % num_partitions


Partitioner = Callable[[bytes, int], int]

PARTITIONERS: dict[str, Partitioner] = {
    "murmur2": murmur2_partition,
    "crc32": crc32_partition,
}

__all__ = [
    "PARTITIONERS",
    "Partitioner",
    "crc32_partition",
    "murmur2",
    "murmur2_partition",
    "to_positive",
]
