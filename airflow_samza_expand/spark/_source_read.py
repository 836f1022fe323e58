"""The executor side of the provider's reader (`spark._source`): read one split's offset ranges
(`spark._source_splits`) into Arrow record batches, replay-safe (``assign`` at the start, stop
just before the end); and the Kafka client settings of the source's options, which the driver
side uses too (this module imports nothing of `spark._source`)."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql.types import StructType

from airflow_samza_expand.core._stale import StaleSummary
from airflow_samza_expand.spark._source_splits import Range, ReadSplit
from airflow_samza_expand.spark._stale_batch import StaleRule, count_stale, write_report

ARROW_BATCH_ROWS = 10_000
# librdkafka's fetcher tuned for reading known ranges with a consumer reused across splits
# (measured outside Spark, 400k records, ranges of a 50k batch: 46k -> 235k records/s over 2
# partitions, 14k -> 185k over 8): a fetch that finds no record returns after 10 ms, not 500 ms
# (a reused consumer's first fetch of its next range waited out the long poll); at most about
# one Arrow batch is prefetched per partition, not 100k records (the rest of the topic beyond
# the range, fetched and thrown away); and a full queue delays the next fetch 5 ms, not 1 s.
READ_FETCH_SETTINGS = {
    "fetch.wait.max.ms": "10",
    "queued.min.messages": str(ARROW_BATCH_ROWS),
    "fetch.queue.backoff.ms": "5",
}
log = logging.getLogger(__name__)

# A read gives up when no record arrives for this long although the range is not done.
READ_STALL_TIMEOUT_S = 120.0
# A read whose client got no record for this long although its ranges are not done asks again
# through a new client, from the offsets it reached: a broker restarted under a client may never
# serve it again (the fault matrix's broker/in-place/between: a pooled consumer from before the
# restart read nothing for 120 s, the batch failed), as the driver's admin reads found
# (`_kafka.leader_offsets`: a client's cached leader epochs answered as fenced).
READ_CLIENT_REFRESH_S = 15.0


def kafka_client_config(options: Mapping[str, str]) -> dict[str, str]:
    """librdkafka settings from the source options (bootstrap servers and/or a config file)."""
    from airflow_samza_expand._kafka.config import client_config

    return client_config(
        bootstrap_servers=options.get("bootstrap_servers") or None,
        config_file=options.get("kafka_config_file") or None,
    )


def read_split(
    options: Mapping[str, str], group_id: str, split: ReadSplit, schema: StructType
) -> Iterator:
    """Yield Arrow record batches holding exactly the records of the split's ranges, each
    record with its SSP's task; with the split's stale-placement rules also count the stale
    placements among them and write one report per rule and checked range."""
    return read_ranges(
        options, group_id, split.tasks, split.ranges, schema, split.rule, split.before
    )


def read_ranges(
    options: Mapping[str, str],
    group_id: str,
    task: str | Sequence[str],
    ranges: list[Range],
    schema: StructType,
    *rules: StaleRule | None,
) -> Iterator:
    """Yield Arrow record batches holding exactly the records of ``ranges`` (``task``: the task
    of every range, or one per range); with ``rules`` (stale placements: the order check beyond the
    snapshot, the count before it) also count the stale placements among them and write one
    report per rule and checked range (`spark._stale_batch`)."""
    import pyarrow as pa
    from confluent_kafka import KafkaError, TopicPartition
    from pyspark.sql.pandas.types import to_arrow_schema

    from airflow_samza_expand._kafka.clients import Consumer

    tasks = [task] * len(ranges) if isinstance(task, str) else list(task)
    task_of = {(t, p): name for name, (t, p, _s, _e) in zip(tasks, ranges, strict=True)}
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    config = kafka_client_config(options)
    config.update(
        {
            "group.id": group_id,
            "enable.auto.commit": "false",
            "enable.auto.offset.store": "false",
            "auto.offset.reset": "earliest",
            "enable.partition.eof": "true",
            **READ_FETCH_SETTINGS,
        }
    )
    consumer = _take_consumer(config, Consumer)
    finished = False
    try:
        _know_partitions(consumer, ranges)
        end = {(t, p): e for t, p, _s, e in ranges}
        checked = _CheckedRanges(rules, ranges)
        pending = set(end)
        position = {(t, p): s for t, p, s, _e in ranges}  # the next offset of each range
        consumer.assign([TopicPartition(t, p, s) for t, p, s, _e in ranges])
        columns: dict[str, list] = {name: [] for name in arrow_schema.names}
        last_progress = time.monotonic()
        refresh_after = READ_CLIENT_REFRESH_S
        while pending:
            # consume() returns once it has num_messages or at its timeout: ask for no more
            # than the ranges have left, or every read would wait out the timeout at its end
            left = sum(end[ssp] - position[ssp] for ssp in pending)
            want = max(1, min(ARROW_BATCH_ROWS, left))
            messages = consumer.consume(num_messages=want, timeout=1.0)
            if not any((m.topic(), m.partition()) in pending for m in messages):
                stalled = time.monotonic() - last_progress
                if stalled > READ_STALL_TIMEOUT_S:
                    raise RuntimeError(
                        f"no records for {READ_STALL_TIMEOUT_S:.0f}s while "
                        f"reading {sorted(pending)} up to {[end[s] for s in sorted(pending)]} - "
                        "the brokers are unreachable or the records were deleted"
                    )
                if stalled > refresh_after:
                    consumer = _new_client(consumer, config, Consumer, position, pending, stalled)
                    refresh_after += READ_CLIENT_REFRESH_S
                continue
            last_progress = time.monotonic()
            refresh_after = READ_CLIENT_REFRESH_S
            done: list[tuple[str, int]] = []
            for msg in messages:
                ssp = (msg.topic(), msg.partition())
                if ssp not in pending:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if msg.offset() >= end[ssp]:
                            pending.discard(ssp)
                            done.append(ssp)
                        continue
                    raise RuntimeError(
                        f"task {task_of[ssp]!r}: reading {ssp[0]}[{ssp[1]}] failed: {err}"
                    )
                offset = msg.offset()
                position[ssp] = offset + 1
                if offset >= end[ssp]:
                    pending.discard(ssp)
                    done.append(ssp)
                    continue
                columns["task"].append(task_of[ssp])
                columns["topic"].append(ssp[0])
                columns["partition"].append(ssp[1])
                columns["offset"].append(offset)
                raw_key = msg.key()
                columns["key"].append(
                    None if raw_key is None else raw_key.decode("utf-8", errors="replace")
                )
                columns["value"].append(msg.value())
                buffer = checked.buffers.get(ssp)
                if buffer is not None:  # an old partition a rule checks (1.5)
                    buffer[0].append(offset)
                    buffer[1].append(raw_key)
                _ts_type, ts = msg.timestamp()
                columns["timestamp"].append(None if ts is None or ts < 0 else ts * 1000)
                if offset + 1 >= end[ssp]:
                    pending.discard(ssp)
                    done.append(ssp)
            if done:
                consumer.incremental_unassign([TopicPartition(t, p) for t, p in done])
            if len(columns["offset"]) >= ARROW_BATCH_ROWS or (not pending and columns["offset"]):
                checked.count()
                yield _to_batch(pa, columns, arrow_schema)
                columns = {name: [] for name in arrow_schema.names}
        checked.report()  # every range read to its end
        finished = True
    finally:
        _give_back(config, consumer, reusable=finished)


# Idle consumers of this Python worker (Spark reuses its Python workers between tasks), by
# client settings: a read split takes one instead of starting a client (its connections and
# metadata) per split and batch - as Spark's own Kafka source keeps a consumer pool per executor.
# A consumer is given back only after a read that ended cleanly (nothing left assigned).
_IDLE: dict[tuple[tuple[str, str], ...], list[Any]] = {}
MAX_IDLE_CONSUMERS = 8


# The partition counts each pooled consumer's metadata knows, by id(consumer); dropped when it
# closes. A consumer assigned a partition its cached metadata does not have (one a growth
# added since the consumer last read the topic) waits for its next metadata refresh before it
# fetches: about 0.9 s for 64 new partitions on the development broker, against 0.05 s when its
# metadata is asked for first (`_know_partitions`). The first batches after a switch in place
# read exactly such partitions.
_KNOWN: dict[int, dict[str, int]] = {}
METADATA_TIMEOUT_S = 3.0


def _know_partitions(consumer: Any, ranges: Sequence[Range]) -> None:
    """Ask for the metadata of each topic of ``ranges`` with a partition ``consumer`` does not
    know yet, before it is assigned them. Best effort: without an answer the read goes on and
    the client finds the partitions at its own next refresh."""
    known = _KNOWN.setdefault(id(consumer), {})
    needed: dict[str, int] = {}
    for topic, partition, _s, _e in ranges:
        needed[topic] = max(needed.get(topic, 0), partition + 1)
    for topic, count in sorted(needed.items()):
        if known.get(topic, 0) >= count:
            continue
        try:
            metadata = consumer.list_topics(topic, timeout=METADATA_TIMEOUT_S)
            known[topic] = len(metadata.topics[topic].partitions)
        except Exception as exc:  # noqa: BLE001 - an optimisation: the read goes on without it
            log.debug("no metadata for %s before reading it (%s): the client finds it later",
                      topic, exc)  # fmt: skip


def _close(consumer: Any) -> None:
    _KNOWN.pop(id(consumer), None)
    consumer.close()


def _take_consumer(config: Mapping[str, str], make: Any) -> Any:
    idle = _IDLE.get(tuple(sorted(config.items())))
    return idle.pop() if idle else make(dict(config))


def _new_client(
    stuck: Any,
    config: Mapping[str, str],
    make: Any,
    position: Mapping[tuple[str, int], int],
    pending: set[tuple[str, int]],
    stalled: float,
) -> Any:
    """A new consumer in place of ``stuck``, which read nothing for ``stalled`` seconds,
    assigned the pending ranges from the offsets read so far (``stuck`` is closed, never
    pooled)."""
    from confluent_kafka import TopicPartition

    at = {f"{t}[{p}]": position[(t, p)] for t, p in sorted(pending)}
    log.warning(
        "reading %s: no record for %.0fs although the ranges are not done - asking again "
        "through a new Kafka client from the offsets reached",
        at,
        stalled,
    )
    with contextlib.suppress(Exception):  # a client the brokers do not serve may not close cleanly
        _close(stuck)
    consumer = make(dict(config))
    consumer.assign([TopicPartition(t, p, position[(t, p)]) for t, p in sorted(pending)])
    return consumer


def _give_back(config: Mapping[str, str], consumer: Any, *, reusable: bool) -> None:
    idle = _IDLE.setdefault(tuple(sorted(config.items())), [])
    if reusable and len(idle) < MAX_IDLE_CONSUMERS:
        try:
            consumer.unassign()
            idle.append(consumer)
            return
        except Exception:  # noqa: BLE001 - a consumer that cannot unassign is closed below
            pass
    _close(consumer)


class _CheckedRanges:
    """The ranges a read checks for stale placements, per rule (the order check beyond the
    snapshot, the count before it): buffered offsets and raw keys, counted per Arrow batch
    (bounded memory), reported once the read is done."""

    def __init__(self, rules: Sequence[StaleRule | None], ranges: list[Range]) -> None:
        self.rules = [r for r in rules if r is not None]
        self.spans: dict[tuple[int, str, int], tuple[int, int]] = {}
        for i, rule in enumerate(self.rules):
            for t, p, s, e in ranges:
                start = rule.checks(t, p, e)
                if start is not None:
                    self.spans[(i, t, p)] = (max(s, start), e)
        self.buffers: dict[tuple[str, int], tuple[list, list]] = {
            (t, p): ([], []) for _i, t, p in self.spans
        }
        self.summaries = {span: StaleSummary() for span in self.spans}

    def count(self) -> None:
        for span in self.spans:
            i, topic, partition = span
            offsets, keys = self.buffers[(topic, partition)]
            if offsets:
                found = count_stale(self.rules[i], topic, partition, offsets, keys)
                self.summaries[span] = self.summaries[span].merge(found)
        for offsets, keys in self.buffers.values():
            offsets.clear()
            keys.clear()

    def report(self) -> None:
        self.count()
        for (i, topic, partition), (begin, end) in self.spans.items():
            summary = self.summaries[(i, topic, partition)]
            write_report(self.rules[i], topic, partition, begin, end, summary)


def _to_batch(pa: Any, columns: dict[str, list], arrow_schema: Any) -> Any:
    arrays = []
    for field in arrow_schema:
        values = columns[field.name]
        if field.name == "timestamp":
            arrays.append(pa.array(values, type=pa.int64()).cast(field.type))
        else:
            arrays.append(pa.array(values, type=field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)


__all__ = [
    "ARROW_BATCH_ROWS",
    "READ_FETCH_SETTINGS",
    "READ_STALL_TIMEOUT_S",
    "kafka_client_config",
    "read_ranges",
    "read_split",
]
