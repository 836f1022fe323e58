"""Partitioner conformance: do a topic's keyed records sit at `hash(key) % N`?

Samples up to K keyed records from the end of every partition (reading at most a bounded number
of records per partition) and decides "murmur2" (Java default), "crc32" (librdkafka default) or
None. A record counts as placed by a partitioner if `hash(key) % M == partition` for the current
count `M = N` or for one of the earlier counts the caller names (records written before an earlier
expansion sit where the smaller count put them). None means neither partitioner explains every
sampled record: the expansion must be refused (`PartitionerMismatchError`). A topic without keyed
records is conformant by default, flagged with `no_keyed_records`.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, TopicPartition

from airflow_samza_expand._kafka.admin import KafkaAdmin, unavailable
from airflow_samza_expand._kafka.authz import raise_if_denied
from airflow_samza_expand._kafka.clients import Consumer
from airflow_samza_expand._kafka.errors import ignored_by_assign_only
from airflow_samza_expand._kafka.partitioners import PARTITIONERS
from airflow_samza_expand.core.errors import PartitionerMismatchError

log = logging.getLogger(__name__)

DEFAULT_SAMPLE_PER_PARTITION = 100
SCAN_FACTOR = 10  # read at most SCAN_FACTOR * K records per partition by default


def show_key(key: bytes, limit: int = 40) -> str:
    """A key for humans: its text if printable UTF-8, else hex (both cut to `limit`)."""
    try:
        text = key.decode("utf-8")
        if text.isprintable():
            return repr(text if len(text) <= limit else text[:limit] + "...")
    except UnicodeDecodeError:
        pass
    hexed = key.hex()
    return "0x" + (hexed if len(hexed) <= limit else hexed[:limit] + "...")


@dataclass(frozen=True)
class Offender:
    """A sampled record that the best partitioner does not explain."""

    key: bytes
    partition: int
    offset: int
    expected: Mapping[str, int]  # partitioner -> partition at the current count

    def describe(self) -> str:
        where = ", ".join(f"{name} -> {p}" for name, p in self.expected.items())
        return (
            f"key {show_key(self.key)} in partition {self.partition} "
            f"(offset {self.offset}): {where}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": show_key(self.key),
            "partition": self.partition,
            "offset": self.offset,
            "expected": dict(self.expected),
        }


@dataclass(frozen=True)
class ConformanceResult:
    """Outcome of a conformance check of one topic."""

    topic: str
    partition_count: int
    partitioner: str | None  # "murmur2", "crc32", or None if neither explains every sample
    matching: tuple[str, ...]  # every partitioner that explains all samples
    records_sampled: int  # records read (keyed or not)
    keyed_records: int  # keyed records checked
    explained: Mapping[str, int]  # partitioner -> keyed records it explains
    offenders: tuple[Offender, ...] = ()
    no_keyed_records: bool = False  # conformant by default: nothing to check
    counts_considered: tuple[int, ...] = field(default=())

    @property
    def conformant(self) -> bool:
        return self.partitioner is not None or self.no_keyed_records

    def describe(self) -> str:
        if self.no_keyed_records:
            return (
                f"topic {self.topic!r}: no keyed records among the {self.records_sampled} sampled; "
                "conformant by default (nothing to check)"
            )
        if self.partitioner is not None:
            return (
                f"topic {self.topic!r} ({self.partition_count} partitions): all "
                f"{self.keyed_records} sampled keyed records match {self.partitioner}"
            )
        scores = ", ".join(f"{n} explains {c}" for n, c in self.explained.items())
        examples = "; ".join(o.describe() for o in self.offenders)
        return (
            f"topic {self.topic!r} ({self.partition_count} partitions): of "
            f"{self.keyed_records} sampled keyed records, neither default partitioner explains "
            f"all ({scores}); e.g. {examples}"
        )

    def raise_if_mismatch(self) -> ConformanceResult:
        """Return self if conformant, else raise PartitionerMismatchError with offenders."""
        if not self.conformant:
            raise PartitionerMismatchError(
                self.describe() + " - the producers use a custom partitioner (or explicit "
                "partitions), so keys would not stay with their task after the expansion; "
                "switch the producers to the default partitioner before expanding"
            )
        return self

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition_count": self.partition_count,
            "partitioner": self.partitioner,
            "matching": list(self.matching),
            "conformant": self.conformant,
            "records_sampled": self.records_sampled,
            "keyed_records": self.keyed_records,
            "explained": dict(self.explained),
            "offenders": [o.to_dict() for o in self.offenders],
            "no_keyed_records": self.no_keyed_records,
            "counts_considered": list(self.counts_considered),
        }


def classify_samples(
    topic: str,
    partition_count: int,
    samples: Iterable[tuple[bytes, int, int]],
    *,
    records_sampled: int | None = None,
    earlier_counts: Iterable[int] = (),
    max_offenders: int = 5,
) -> ConformanceResult:
    """Decide the partitioner of `(key, partition, offset)` samples of keyed records (pure)."""
    counts = tuple(sorted({partition_count, *earlier_counts}, reverse=True))
    keyed = list(samples)
    explained = {name: 0 for name in PARTITIONERS}
    misses: dict[str, list[tuple[bytes, int, int]]] = {name: [] for name in PARTITIONERS}
    for key, partition, offset in keyed:
        for name, fn in PARTITIONERS.items():
            if any(partition < m and fn(key, m) == partition for m in counts):
                explained[name] += 1
            else:
                misses[name].append((key, partition, offset))
    total = len(keyed)
    if total == 0:
        return ConformanceResult(
            topic,
            partition_count,
            None,
            (),
            records_sampled or 0,
            0,
            explained,
            no_keyed_records=True,
            counts_considered=counts,
        )
    matching = tuple(name for name, n in explained.items() if n == total)
    best = max(PARTITIONERS, key=lambda name: explained[name])
    offenders = ()
    if not matching:
        offenders = tuple(
            Offender(
                key,
                partition,
                offset,
                {n: fn(key, partition_count) for n, fn in PARTITIONERS.items()},
            )
            for key, partition, offset in sorted(misses[best], key=lambda s: (s[1], s[2]))[
                :max_offenders
            ]
        )
    return ConformanceResult(
        topic=topic,
        partition_count=partition_count,
        partitioner=matching[0] if matching else None,
        matching=matching,
        records_sampled=total if records_sampled is None else records_sampled,
        keyed_records=total,
        explained=explained,
        offenders=offenders,
        counts_considered=counts,
    )


def sample_keyed_records(
    config: Mapping[str, str],
    topic: str,
    partition_count: int,
    *,
    per_partition: int = DEFAULT_SAMPLE_PER_PARTITION,
    max_scan_per_partition: int | None = None,
    timeout_s: float = 30.0,
) -> tuple[int, list[tuple[bytes, int, int]]]:
    """Read the last `max_scan_per_partition` records of every partition (one consumer, assign
    only, nothing committed); keep the last `per_partition` keyed ones of each.

    Returns (records read, [(key, partition, offset)]).
    """
    scan = max_scan_per_partition or per_partition * SCAN_FACTOR
    admin = KafkaAdmin(config, timeout_s=timeout_s)
    marks = admin.watermarks(topic, range(partition_count))
    admin.close()
    starts = {p: max(low, high - scan) for p, (low, high) in marks.items()}
    pending = {p: high for p, (_, high) in marks.items() if high > starts[p]}
    kept: dict[int, collections.deque] = {p: collections.deque(maxlen=per_partition) for p in marks}
    read = 0
    if not pending:
        return 0, []
    settings = {k: v for k, v in config.items() if k not in ("group.id", "enable.auto.commit")}
    settings.update(
        {
            "group.id": f"samza-expand-conformance-{topic}",
            "enable.auto.commit": "false",
            "enable.partition.eof": "true",
            "auto.offset.reset": "earliest",
        }
    )
    consumer = Consumer(settings)
    try:
        consumer.assign([TopicPartition(topic, p, starts[p]) for p in pending])
        positions = dict(starts)
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise unavailable(
                    f"sampling topic {topic!r}",
                    config,
                    f"partitions {sorted(pending)} not read to their end within {timeout_s:g} s",
                )
            # consume() waits for the whole batch or the timeout: ask for what is left
            left = sum(pending[p] - positions[p] for p in pending)
            batch = max(1, min(left, 10_000))
            for message in consumer.consume(num_messages=batch, timeout=0.2):
                error = message.error()
                partition = message.partition()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        if message.offset() >= pending.get(partition, 0):
                            pending.pop(partition, None)
                        continue
                    if ignored_by_assign_only(error):
                        continue
                    raise_if_denied(
                        error, operation="READ", resource="TOPIC", name=topic,
                        what=f"sampling topic {topic!r}", config=config,
                    )  # fmt: skip
                    raise unavailable(f"sampling topic {topic!r}", config, error.str())
                if partition not in pending:
                    continue
                read += 1
                positions[partition] = message.offset() + 1
                key = message.key()
                if key:
                    kept[partition].append((bytes(key), partition, message.offset()))
                if message.offset() + 1 >= pending[partition]:
                    pending.pop(partition)
    finally:
        consumer.close()
    return read, [s for p in sorted(kept) for s in kept[p]]


def check_conformance(
    config: Mapping[str, str],
    topic: str,
    *,
    partition_count: int | None = None,
    sample_per_partition: int = DEFAULT_SAMPLE_PER_PARTITION,
    max_scan_per_partition: int | None = None,
    earlier_counts: Iterable[int] = (),
    timeout_s: float = 30.0,
    max_offenders: int = 5,
) -> ConformanceResult:
    """Sample `topic` and classify its partitioner (UnknownTopicError if it does not exist).

    `earlier_counts`: partition counts the topic had before (e.g. the job model's initial count
    and its doublings), whose placements are also accepted. Call `.raise_if_mismatch()` to refuse.
    """
    if partition_count is None:
        admin = KafkaAdmin(config, timeout_s=timeout_s)
        partition_count = admin.partition_counts([topic])[topic]
        admin.close()
    read, samples = sample_keyed_records(
        config,
        topic,
        partition_count,
        per_partition=sample_per_partition,
        max_scan_per_partition=max_scan_per_partition,
        timeout_s=timeout_s,
    )
    result = classify_samples(
        topic,
        partition_count,
        samples,
        records_sampled=read,
        earlier_counts=[c for c in earlier_counts if 0 < c < partition_count],
        max_offenders=max_offenders,
    )
    if result.no_keyed_records:
        log.warning("%s", result.describe())
    else:
        log.info("%s", result.describe())
    return result


__all__ = [
    "ConformanceResult",
    "Offender",
    "check_conformance",
    "classify_samples",
    "sample_keyed_records",
]
