"""``samza-expand demo --stale-producer-refresh-ms MS``: a negative control for the proof of
order (docs/design.md 'Stale placements').

One extra keyed producer (keys ``stale-*``) refreshes its metadata only every ``MS`` ms, so
after each expansion it keeps placing moved keys in their old partitions for up to that long.
After the run the old partitions are scanned (`_protocol.barrier.stale_scan`) and every stale
placement is counted: *before* the barrier snapshot (held by the barrier) and *after* it
(order at risk). ``report.json`` carries the counts and the ``order:`` line.

Ranges per expansion ``N -> 2N`` of the old partitions ``0..N-1``: before = from the first
record written at or after the expansion (``expanded_at``; the broker's record timestamps) up to
the barrier snapshot; after = from the snapshot up to the next expansion's start (or the end).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow_samza_expand._demo.producer import KeyedProducer
from airflow_samza_expand._protocol.records import expansion_id_for
from airflow_samza_expand.core._order import order_report
from airflow_samza_expand.core._stale import StaleSummary

if TYPE_CHECKING:
    from airflow_samza_expand.core._record import ExpansionRecord

STALE_KEYS = 8
STALE_RATE = 8.0  # records per second


class Producers:
    """Several `KeyedProducer`s seen as one by the scenario (stop, pause, snapshot)."""

    def __init__(self, *producers: KeyedProducer) -> None:
        self.producers = producers

    @property
    def total(self) -> int:
        return sum(p.total for p in self.producers)

    def pause(self, timeout_s: float = 60.0) -> None:
        for p in self.producers:
            p.pause(timeout_s)

    def resume(self) -> None:
        for p in self.producers:
            p.resume()

    def stop(self) -> None:
        for p in self.producers:
            p.stop()

    def snapshot(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.producers:
            out.update(p.snapshot())
        return out


def add_stale_producer(scenario: Any, refresh_ms: int) -> KeyedProducer:
    """Start the slow-refreshing producer beside the scenario's own (after `start_producer`)."""
    if refresh_ms <= 0:
        raise ValueError(f"--stale-producer-refresh-ms must be > 0, got {refresh_ms}")
    stale = KeyedProducer(
        scenario.config,
        scenario.topic,
        keys=STALE_KEYS,
        rate=STALE_RATE,
        refresh_ms=refresh_ms,
        key_prefix="stale",
    ).start()
    scenario.producer = Producers(scenario.producer, stale)
    scenario.log(
        f"stale producer: {STALE_KEYS} keys, {STALE_RATE:.0f} records/s, metadata refresh "
        f"{refresh_ms} ms (negative control: its late placements are counted)"
    )
    return stale


def _fields(
    record: ExpansionRecord | Mapping[str, Any], topic: str
) -> tuple[dict[int, int], int, int, float]:
    """(barrier of `topic`'s old partitions, before, after, expanded-at epoch s) of an
    expansion record (the legacy dict or the typed ExpansionRecord): the grown stream named,
    never "the first" - a join's other stream stays and has no barrier."""
    if isinstance(record, Mapping):
        barrier = {int(p): int(o) for p, o in record["barrier"][topic].items()}
        before = int(record["counts_before"][topic])
        after = int(record["counts_after"][topic])
        at = record.get("expanded_at")
    else:  # core._record.ExpansionRecord
        barrier = {int(p): int(o) for p, o in (record.barrier or {})[topic].items()}
        before, after = record.grown_counts()[topic]
        expand = record.steps.get("expand")
        at = expand.ended_at if expand is not None else None
    if not at:
        raise ValueError("expansion record has no expansion time - did the expand step run?")
    return barrier, before, after, datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()


def _offsets_at(config: Mapping[str, Any], topic: str, count: int, at_s: float) -> dict[int, int]:
    """First offset of each partition written at or after ``at_s`` (its end if none)."""
    from confluent_kafka import TopicPartition

    from airflow_samza_expand._kafka.clients import Consumer

    consumer = Consumer({**dict(config), "group.id": "samza-expand-demo-times"})
    try:
        asked = [TopicPartition(topic, p, int(at_s * 1000)) for p in range(count)]
        found = consumer.offsets_for_times(asked, timeout=30)
        out = {}
        for tp in found:
            if tp.offset < 0:
                _, high = consumer.get_watermark_offsets(TopicPartition(topic, tp.partition), 30)
                out[tp.partition] = high
            else:
                out[tp.partition] = tp.offset
        return out
    finally:
        consumer.close()


def expansion_records(scenario: Any) -> list[Any]:
    """The expansion record of each of the scenario's expansions, in order."""
    topic = scenario.topic
    return [
        scenario.store.get_expansion(
            expansion_id_for(scenario.job_name, {topic: o.counts[0]}, {topic: o.counts[1]})
        )
        for o in scenario.outcomes
    ]


def order_counts(
    scenario: Any, records: list[Any] | None = None, partitioner: str = "crc32"
) -> dict[str, Any]:
    """Stale placements before/after each expansion's snapshot, and the order verdict.

    ``records``: the expansion records, oldest first (default: those of the scenario's runs).
    """
    from airflow_samza_expand._protocol.barrier.stale_scan import StaleScanner, scan_until_caught_up

    topic = scenario.topic
    spans = []
    for record in expansion_records(scenario) if records is None else records:
        barrier, before, after, at = _fields(record, topic)
        spans.append((before, after, barrier, _offsets_at(scenario.config, topic, before, at)))
    total_before, total_after = StaleSummary(), StaleSummary()
    rows = []
    for i, (before, after, barrier, start) in enumerate(spans):
        with StaleScanner(scenario.config, {topic: (before, after)}, partitioner) as scanner:
            held = scan_until_caught_up(scanner, {topic: start}, until={topic: barrier})
            end = None
            if i + 1 < len(spans):
                end = {topic: {p: spans[i + 1][3][p] for p in range(before)}}
            late = scan_until_caught_up(scanner, {topic: barrier}, until=end)
        b, a = StaleSummary().add(held.placements), StaleSummary().add(late.placements)
        total_before, total_after = (
            total_before.add(held.placements),
            total_after.add(late.placements),
        )
        rows.append({"partitions": {"before": before, "after": after}, **order_report(b, a)})
    return {**order_report(total_before, total_after), "expansions": rows}


__all__ = ["Producers", "add_stale_producer", "expansion_records", "order_counts"]
