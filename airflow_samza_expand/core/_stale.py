"""Stale placements (docs/design.md 'Stale placements'): records a producer with old metadata
put in an old partition after the expansion.

A stream grown ``N_old -> N_new`` (``N_new = N_old * 2**k``). A keyed record in an old partition
``p < N_old`` at or after ``start`` (that partition's end offset at the moment of the
expansion) whose key maps to ``q = hash(key) % N_new != p`` under the partitioner the plan
detected was placed by a producer that still used the old count: a *stale placement*. Before
the barrier snapshot it is harmless (the job reads the whole old partition before the new
ones start) but tells the barrier that producers have not refreshed yet; after the snapshot it
puts the order of its key at risk.

Pure: the hash comes in as ``partition_of(key_bytes, count) -> partition`` (the kafka layer's
``_kafka.partitioners`` provides murmur2 and CRC32). A record without a key (or with an empty
one: librdkafka sends those to a random partition) has no fixed place and is never stale.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

PartitionOf = Callable[[bytes, int], int]

# How many distinct keys and example placements a summary keeps (records stay bounded).
MAX_KEYS_KEPT = 100
MAX_EXAMPLES = 5


@dataclass(frozen=True, order=True)
class StalePlacement:
    """One record a stale producer put in an old partition."""

    topic: str
    partition: int
    offset: int
    key: str  # the key as text (UTF-8, undecodable bytes replaced) for logs and reports
    expected_partition: int  # where the key lives at the new count

    def describe(self) -> str:
        return (
            f"stale placement: {self.topic}[{self.partition}]@{self.offset} key {self.key!r} "
            f"belongs in partition {self.expected_partition}"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "key": self.key,
            "expected_partition": self.expected_partition,
        }


def check_growth(old_count: int, new_count: int) -> None:
    """ValueError unless ``new_count`` is ``old_count * 2**k`` with ``k >= 1``."""
    for name, n in (("old count", old_count), ("new count", new_count)):
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise ValueError(f"{name} must be a positive integer, got {n!r}")
    ratio, rest = divmod(new_count, old_count)
    if rest or ratio < 2 or ratio & (ratio - 1):
        raise ValueError(
            f"growth {old_count} -> {new_count} is not a power-of-two multiple - stale "
            "placements are defined only for the growths the expansion performs (x2^k)"
        )


def key_bytes(key: bytes | str | None) -> bytes | None:
    """The bytes the partitioner hashed; None for a record without a usable key."""
    if key is None:
        return None
    raw = key.encode("utf-8") if isinstance(key, str) else bytes(key)
    return raw or None


def stale_target(
    key: bytes | str | None,
    partition: int,
    offset: int,
    *,
    start_offset: int,
    old_count: int,
    new_count: int,
    partition_of: PartitionOf | Sequence[PartitionOf],
) -> int | None:
    """The partition the key belongs in if the record is a stale placement, else None.

    ``partition_of`` may be several candidate partitioners (the plan could not tell them
    apart): the record is stale only if every candidate places the key elsewhere (the first
    candidate's partition is returned).
    """
    raw = key_bytes(key)
    if raw is None or partition >= old_count or offset < start_offset:
        return None
    candidates = [partition_of] if callable(partition_of) else list(partition_of)
    if not candidates:
        raise ValueError("no partitioner given - pass the partitioner the plan detected")
    targets = [f(raw, new_count) for f in candidates]
    if partition in targets:
        return None
    return targets[0]


def is_stale_placement(key: bytes | str | None, partition: int, offset: int, **rule: Any) -> bool:
    """Whether the record is a stale placement; ``rule``: the keyword arguments of
    `stale_target` (``start_offset``, ``old_count``, ``new_count``, ``partition_of``)."""
    return stale_target(key, partition, offset, **rule) is not None


def placed_with(
    key: bytes | str, partition: int, counts: Sequence[int], partition_of: PartitionOf
) -> int | None:
    """The newest count of a growth chain (``counts`` ascending) under which the key sits in
    ``partition``; None if no count explains the placement (an explicit partition)."""
    raw = key_bytes(key)
    if raw is None:
        return None
    for count in sorted(counts, reverse=True):
        if partition < count and partition_of(raw, count) == partition:
            return count
    return None


def check_chain(counts: Sequence[int]) -> None:
    """ValueError unless every step of the chain is a power-of-two growth."""
    if len(counts) < 2:
        raise ValueError(f"a growth chain needs at least two counts, got {list(counts)!r}")
    for old, new in zip(counts, counts[1:], strict=False):
        check_growth(old, new)


def stale_in_chain(
    key: bytes | str | None,
    partition: int,
    *,
    counts: Sequence[int],
    partition_of: PartitionOf,
) -> int | None:
    """For a chain of growths (``2 -> 4 -> 8``): the partition the key belongs in at the last
    count if a record in ``partition`` (written after the last expansion) is a stale placement
    of that last expansion, else None. A producer two growths behind is as stale as one behind.
    """
    check_chain(counts)
    return stale_target(
        key,
        partition,
        0,
        start_offset=0,
        old_count=counts[-2],
        new_count=counts[-1],
        partition_of=partition_of,
    )


@dataclass(frozen=True)
class StaleSummary:
    """Counts of stale placements, bounded in size (kept in the expansion record)."""

    records: int = 0
    keys: Mapping[str, int] = field(default_factory=dict)  # key -> records (<= MAX_KEYS_KEPT)
    keys_truncated: bool = False  # more keys were stale than MAX_KEYS_KEPT: `keys` is a sample
    examples: tuple[StalePlacement, ...] = ()
    last_offset: Mapping[str, Mapping[int, int]] = field(default_factory=dict)

    def add(self, placements: Iterable[StalePlacement]) -> StaleSummary:
        """A new summary with ``placements`` counted."""
        keys = dict(self.keys)
        truncated = self.keys_truncated
        examples = list(self.examples)
        last = {t: dict(ps) for t, ps in self.last_offset.items()}
        records = self.records
        for placement in placements:
            records += 1
            if placement.key in keys:
                keys[placement.key] += 1
            elif len(keys) < MAX_KEYS_KEPT:
                keys[placement.key] = 1
            else:
                truncated = True
            if len(examples) < MAX_EXAMPLES:
                examples.append(placement)
            topic = last.setdefault(placement.topic, {})
            topic[placement.partition] = max(topic.get(placement.partition, -1), placement.offset)
        return StaleSummary(records, keys, truncated, tuple(examples), last)

    def merge(self, other: StaleSummary) -> StaleSummary:
        """Both summaries' counts together (``other``'s keys and examples after ours)."""
        if not other.records:
            return self
        if not self.records:
            return other
        keys = dict(self.keys)
        truncated = self.keys_truncated or other.keys_truncated
        for key, n in other.keys.items():
            if key in keys:
                keys[key] += n
            elif len(keys) < MAX_KEYS_KEPT:
                keys[key] = n
            else:
                truncated = True
        last = {t: dict(ps) for t, ps in self.last_offset.items()}
        for topic, partitions in other.last_offset.items():
            mine = last.setdefault(topic, {})
            for partition, offset in partitions.items():
                mine[partition] = max(mine.get(partition, -1), offset)
        examples = (self.examples + other.examples)[:MAX_EXAMPLES]
        return StaleSummary(self.records + other.records, keys, truncated, examples, last)

    def key_count(self) -> str:
        """``"3"`` or ``"at least 100"`` (when only a sample of the keys was kept)."""
        return f"at least {len(self.keys)}" if self.keys_truncated else str(len(self.keys))

    def counts(self) -> dict[str, object]:
        """Records and records per key (no examples or offsets): a processor's heartbeat."""
        return {
            "records": self.records,
            "keys_truncated": self.keys_truncated,
            # a list, not an object: record keys never become JSON keys (a key named like a
            # secret setting would make the coordinator refuse the record)
            "keys": [[k, n] for k, n in sorted(self.keys.items())],
        }

    def to_dict(self) -> dict[str, object]:
        return {
            **self.counts(),
            "examples": [e.to_dict() for e in self.examples],
            "last_offset": {
                t: {str(p): o for p, o in sorted(ps.items())}
                for t, ps in sorted(self.last_offset.items())
            },
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, object] | None) -> StaleSummary:
        """Inverse of `to_dict`; ValueError naming a malformed field."""
        if not doc:
            return cls()
        try:
            examples = tuple(
                StalePlacement(
                    str(e["topic"]),
                    int(e["partition"]),
                    int(e["offset"]),
                    str(e["key"]),
                    int(e["expected_partition"]),
                )
                for e in doc.get("examples", [])  # type: ignore[union-attr]
            )
            return cls(
                records=int(doc.get("records", 0)),  # type: ignore[arg-type]
                keys={str(k): int(v) for k, v in doc.get("keys", [])},  # type: ignore[union-attr]
                keys_truncated=bool(doc.get("keys_truncated", False)),
                examples=examples,
                last_offset={
                    str(t): {int(p): int(o) for p, o in dict(ps).items()}
                    for t, ps in dict(doc.get("last_offset", {})).items()  # type: ignore[arg-type]
                },
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"malformed stale placement summary: {exc!r}") from None


__all__ = [
    "MAX_EXAMPLES",
    "MAX_KEYS_KEPT",
    "PartitionOf",
    "StalePlacement",
    "StaleSummary",
    "check_chain",
    "check_growth",
    "is_stale_placement",
    "key_bytes",
    "placed_with",
    "stale_in_chain",
    "stale_target",
]
