"""Read what was appended to the old partitions since an expansion; find stale placements.

The barrier (between the expansion and its snapshot) and the restarted job call `StaleScanner`
to check the records of the old partitions ``0 .. N_old-1`` of each grown topic against rule
1.5 (`core._stale`). A scan is resumable: it starts at ``positions`` (the next offset to check
of every old partition; at first the partitions' end offsets at the moment of the expansion)
and returns the new positions with the stale placements it found.

Cost of one `StaleScanner.poll`:

* one ListOffsets request (one admin call, the high watermarks of every old partition) first;
  when nothing was appended since ``positions`` that is all: a constant number of requests
  per poll however long the barrier waits;
* otherwise fetches of at most ``max_records`` records (bounded work per poll; the rest is read
  by the next poll from the returned positions). Nothing is committed; the scanner's consumer
  only ever uses ``assign``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, TopicPartition

from airflow_samza_expand._kafka.admin import (
    CONSUMER_ONLY_SETTINGS,
    KafkaAdmin,
    unavailable,
)
from airflow_samza_expand._kafka.authz import raise_if_denied
from airflow_samza_expand._kafka.clients import Consumer
from airflow_samza_expand._kafka.errors import ignored_by_assign_only
from airflow_samza_expand._kafka.partitioners import PARTITIONERS
from airflow_samza_expand.core._stale import (
    PartitionOf,
    StalePlacement,
    check_growth,
    stale_target,
)

Offsets = dict[str, dict[int, int]]
DEFAULT_MAX_RECORDS = 10_000
CONSUME_BATCH = 1_000


@dataclass(frozen=True)
class ScanResult:
    """One poll of the scan."""

    positions: Offsets  # next offset to check of every old partition
    placements: tuple[StalePlacement, ...]
    records_read: int
    highs: Offsets  # high watermarks read at the start of the poll
    requests: int  # ListOffsets calls + consume rounds (0 consume rounds: nothing appended)

    @property
    def caught_up(self) -> bool:
        """True when every old partition was checked up to the high watermark of this poll."""
        return all(self.positions[t][p] >= h for t, ps in self.highs.items() for p, h in ps.items())

    def backlog(self) -> int:
        """Records appended but not yet checked (as of this poll's watermarks)."""
        return sum(
            max(0, h - self.positions[t][p]) for t, ps in self.highs.items() for p, h in ps.items()
        )


def resolve_partitioners(names: str | Sequence[str] | None) -> tuple[PartitionOf, ...]:
    """The hash functions of the partitioner(s) the plan detected.

    ``None`` or an empty list (the plan saw no keyed record) means both defaults: a record is
    then stale only if neither places its key in its partition.
    """
    if names is None or (not isinstance(names, str) and not names):
        return tuple(PARTITIONERS[n] for n in sorted(PARTITIONERS))
    wanted = [names] if isinstance(names, str) else list(names)
    unknown = [n for n in wanted if n not in PARTITIONERS]
    if unknown:
        raise ValueError(
            f"unknown partitioner {unknown[0]!r} - give one of {', '.join(sorted(PARTITIONERS))}"
        )
    return tuple(PARTITIONERS[n] for n in wanted)


def check_offsets(
    growths: Mapping[str, tuple[int, int]], offsets: Mapping[str, Mapping[int, int]], what: str
) -> Offsets:
    """Offsets for exactly the old partitions of every grown topic; ValueError naming a gap."""
    out: Offsets = {}
    for topic, (old, new) in sorted(growths.items()):
        check_growth(old, new)
        given = offsets.get(topic)
        if given is None:
            raise ValueError(
                f"{what} has no offsets for topic {topic!r} - give one per old partition"
            )
        missing = [p for p in range(old) if p not in given]
        if missing:
            raise ValueError(
                f"{what} of topic {topic!r} lacks old partition(s) {missing} - give an offset "
                f"for each of partitions 0..{old - 1}"
            )
        out[topic] = {p: int(given[p]) for p in range(old)}
    return out


class StaleScanner:
    """Finds stale placements in the old partitions of grown topics, poll by poll.

    ``growths``: topic -> (old count, new count). ``partitioner``: a name, several names or
    None (see `resolve_partitioners`). The scanner keeps one admin client and one consumer
    across polls; `close` them when done.
    """

    def __init__(
        self,
        config: Mapping[str, str],
        growths: Mapping[str, tuple[int, int]],
        partitioner: str | Sequence[str] | None,
        *,
        max_records: int = DEFAULT_MAX_RECORDS,
        timeout_s: float = 30.0,
        admin: KafkaAdmin | None = None,
    ) -> None:
        if max_records <= 0:
            raise ValueError(f"max_records must be > 0, got {max_records}")
        for old, new in growths.values():
            check_growth(old, new)
        self.config = dict(config)
        self.growths = {t: (int(o), int(n)) for t, (o, n) in growths.items()}
        self.partition_of = resolve_partitioners(partitioner)
        self.max_records = max_records
        self.timeout_s = timeout_s
        self._own_admin = admin is None
        self.admin = admin if admin is not None else KafkaAdmin(self.config, timeout_s=timeout_s)
        self._consumer: Consumer | None = None

    def old_partitions(self) -> dict[str, range]:
        return {t: range(old) for t, (old, _) in sorted(self.growths.items())}

    def poll(
        self,
        positions: Mapping[str, Mapping[int, int]],
        *,
        until: Mapping[str, Mapping[int, int]] | None = None,
    ) -> ScanResult:
        """Check the records from ``positions`` on (at most ``max_records`` of them).

        ``until`` (optional, exclusive) stops each partition there instead of at its high
        watermark: the restarted job checks exactly the ranges it read.
        """
        start = check_offsets(self.growths, positions, "scan positions")
        highs = self.admin.high_watermarks(self.old_partitions())
        if until is not None:
            limit = check_offsets(self.growths, until, "scan end offsets")
            highs = {t: {p: min(h, limit[t][p]) for p, h in ps.items()} for t, ps in highs.items()}
        pending = {(t, p): h for t, ps in highs.items() for p, h in ps.items() if h > start[t][p]}
        if not pending:
            return ScanResult(start, (), 0, highs, requests=1)
        found, read, rounds = self._read(start, pending)
        return ScanResult(start, tuple(found), read, highs, requests=1 + rounds)

    def _consumer_for(self) -> Consumer:
        if self._consumer is None:
            settings = {k: v for k, v in self.config.items() if k not in CONSUMER_ONLY_SETTINGS}
            settings.update(
                {
                    # assign only: the group is never joined and nothing is committed
                    "group.id": f"samza-expand-stale-scan-{uuid.uuid4().hex[:12]}",
                    "enable.auto.commit": "false",
                    "enable.auto.offset.store": "false",
                    "enable.partition.eof": "true",
                    "auto.offset.reset": "earliest",
                }
            )
            self._consumer = Consumer(settings)
        return self._consumer

    def _read(
        self, positions: Offsets, pending: dict[tuple[str, int], int]
    ) -> tuple[list[StalePlacement], int, int]:
        """Consume the pending ranges (mutates ``positions``); (placements, records, rounds)."""
        consumer = self._consumer_for()
        consumer.assign([TopicPartition(t, p, positions[t][p]) for t, p in sorted(pending)])
        found: list[StalePlacement] = []
        read = rounds = 0
        deadline = time.monotonic() + self.timeout_s
        try:
            while pending and read < self.max_records:
                if time.monotonic() > deadline:
                    raise unavailable(
                        "scanning old partitions for stale placements",
                        self.config,
                        f"{sorted(pending)} not read to their end within {self.timeout_s:g} s",
                    )
                left = sum(h - positions[t][p] for (t, p), h in pending.items())
                batch = max(1, min(left, CONSUME_BATCH, self.max_records - read))
                rounds += 1
                for message in consumer.consume(num_messages=batch, timeout=0.2):
                    read += self._take(message, positions, pending, found)
        finally:
            consumer.unassign()
        return found, read, rounds

    def _take(
        self,
        message: Any,
        positions: Offsets,
        pending: dict[tuple[str, int], int],
        found: list[StalePlacement],
    ) -> int:
        """Check one consumed message; 1 if it was a record within the pending ranges."""
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        where = (topic, partition)
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                # end of what is readable now (also below the watermark: open transactions)
                if where in pending:
                    positions[topic][partition] = max(positions[topic][partition], offset)
                    pending.pop(where)
                return 0
            if ignored_by_assign_only(error):
                return 0
            what = "scanning old partitions for stale placements"
            name = topic or ", ".join(self.growths)
            raise_if_denied(
                error, operation="READ", resource="TOPIC", name=name, what=what, config=self.config
            )
            raise unavailable(what, self.config, error.str())
        if where not in pending or offset < positions[topic][partition]:
            return 0
        if offset >= pending[where]:
            pending.pop(where)  # appended after this poll's watermarks: the next poll reads it
            return 0
        old, new = self.growths[topic]
        key = message.key()
        target = stale_target(
            key,
            partition,
            offset,
            start_offset=0,
            old_count=old,
            new_count=new,
            partition_of=self.partition_of,
        )
        if target is not None:
            found.append(
                StalePlacement(topic, partition, offset, key.decode("utf-8", "replace"), target)
            )
        positions[topic][partition] = offset + 1
        if offset + 1 >= pending[where]:
            pending.pop(where)
        return 1

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        if self._own_admin:
            self.admin.close()

    def __enter__(self) -> StaleScanner:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def scan_until_caught_up(
    scanner: StaleScanner,
    positions: Mapping[str, Mapping[int, int]],
    *,
    until: Mapping[str, Mapping[int, int]] | None = None,
    max_polls: int = 1000,
) -> ScanResult:
    """Poll until the scan reaches ``until`` or the watermarks of its latest poll (the job's
    check, the demo, tests); the placements of every poll are returned together."""
    found: list[StalePlacement] = []
    read = requests = 0
    current: Mapping[str, Mapping[int, int]] = positions
    for _ in range(max_polls):
        result = scanner.poll(current, until=until)
        found.extend(result.placements)
        read += result.records_read
        requests += result.requests
        current = result.positions
        if result.caught_up:
            return ScanResult(result.positions, tuple(found), read, result.highs, requests)
    raise RuntimeError(f"stale scan not caught up after {max_polls} polls - producers outpace it")


__all__ = [
    "DEFAULT_MAX_RECORDS",
    "Offsets",
    "ScanResult",
    "StaleScanner",
    "check_offsets",
    "resolve_partitioners",
    "scan_until_caught_up",
]
