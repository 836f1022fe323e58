"""What a restart costs the job, from its own records: the downtime of a switch in place (rule
1.9) and the moved keys' extra latency.

* Downtime of a switch in place = the longest gap between two committed batches from the last
  one before vN+1 was written to the ``after``-th one after the switch, minus the median gap of
  the ``steady`` batches before the write (the trigger's own cadence is not downtime). Shared by
  ``samza-expand demo`` and ``benchmarks/handover.py``.
* Moved keys' latency: a key whose partition changed with the expansion waits for the barrier
  (its own old partition, in place). From its first record in a new partition (the record's
  produce timestamp) to the job's first output that counted it (the output record's timestamp).

The computations are pure functions; `commit_times`, `first_records` and `output_times` read the
job's log and topics.
"""

from __future__ import annotations

import json
import re
import statistics
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

# a line the job logs after each committed batch (spark._driving.Driving.commit_offsets)
_COMMIT_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*committed group \S+ offsets (\{.*\})$", re.M
)
# ... and when it switched to a newer job model in place or decided to restart its query on it
# in-app (spark.runtime.Job.poll_in_app)
_SWITCH_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*switch in (?:place|app): ", re.M
)


def _log_time(stamp: str) -> float:
    """A log line's ``asctime`` (local time, as Python's logging writes it) as epoch seconds."""
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


@dataclass(frozen=True)
class Commit:
    """One committed batch of the job: when (epoch s) and its end offsets per topic."""

    at: float
    offsets: dict[str, dict[int, int]]


def commits(log_text: str) -> list[Commit]:
    """The job's committed batches, oldest first, from its log."""
    out = []
    for m in _COMMIT_LINE.finditer(log_text):
        offsets = {t: {int(p): int(o) for p, o in ps.items()} for t, ps in json.loads(m[2]).items()}
        out.append(Commit(_log_time(m[1]), offsets))
    return out


def commit_times(log_text: str) -> list[float]:
    """When the job committed its batches (epoch s), from its log."""
    return [c.at for c in commits(log_text)]


def switch_times(log_text: str) -> list[float]:
    """When the job switched to a newer job model in place (epoch s), from its log."""
    return [_log_time(m[1]) for m in _SWITCH_LINE.finditer(log_text)]


def switch_downtime_s(
    commit_at: Sequence[float],
    written_at: float,
    switched_at: float,
    *,
    steady: int = 10,
    after: int = 3,
) -> float | None:
    """Downtime of a switch in place (see the module docstring); None while the job has not
    committed 2 batches before the write and ``after`` batches after the switch."""
    times = sorted(commit_at)
    before = [t for t in times if t < written_at]
    later = [t for t in times if t > switched_at]
    if len(before) < 2 or len(later) < after:
        return None
    recent = before[-(steady + 1) :]
    cadence = statistics.median(b - a for a, b in zip(recent, recent[1:], strict=False))
    window = [t for t in times if before[-1] <= t <= later[after - 1]]
    longest = max(b - a for a, b in zip(window, window[1:], strict=False))
    return round(max(0.0, longest - cadence), 3)


@dataclass(frozen=True)
class MovedKeyLatency:
    """Seconds from each moved key's first record in a new partition to the output counting it."""

    keys: int  # moved keys with a record in a new partition
    median_s: float | None
    max_s: float | None
    unprocessed: int  # moved keys no output counted yet

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def moved_key_latency(
    first_new: Mapping[str, tuple[int, float]],
    outputs: Iterable[tuple[str, int, float]],
) -> MovedKeyLatency:
    """``first_new``: moved key -> (seq, produce time) of its first record in a new partition;
    ``outputs``: the job's outputs (key, last seq counted, output time). A key's latency ends at
    its earliest output whose last seq is at least that record's."""
    done: dict[str, float] = {}
    for key, last_seq, at in outputs:
        want = first_new.get(key)
        if want is None or last_seq < want[0]:
            continue
        done[key] = min(done.get(key, at), at)
    seconds = sorted(max(0.0, done[k] - first_new[k][1]) for k in done)
    return MovedKeyLatency(
        keys=len(first_new),
        median_s=round(statistics.median(seconds), 3) if seconds else None,
        max_s=round(seconds[-1], 3) if seconds else None,
        unprocessed=len(first_new) - len(done),
    )


def _read(config: Mapping[str, Any], topic: str, partitions: Sequence[int]) -> Iterable[Any]:
    """Every record of ``topic``'s ``partitions`` from the start, per partition in order."""
    from confluent_kafka import KafkaError, TopicPartition

    from airflow_samza_expand._kafka.clients import Consumer

    consumer = Consumer(
        {
            **dict(config),
            "group.id": f"samza-expand-latency-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": "false",
            "enable.partition.eof": "true",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        pending = set(partitions)
        while pending:
            msg = consumer.poll(30)
            if msg is None:
                raise TimeoutError(f"reading {topic}: partitions {sorted(pending)} unfinished")
            if msg.error():
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(f"reading {topic}: {msg.error()}")
                pending.discard(msg.partition())
                continue
            yield msg
    finally:
        consumer.close()


def first_records(
    config: Mapping[str, Any], topic: str, partitions: Sequence[int]
) -> dict[str, tuple[int, float]]:
    """Each key's first record in ``partitions``: key -> (seq, produce time in epoch s)."""
    out: dict[str, tuple[int, float]] = {}
    for msg in _read(config, topic, partitions):
        value = json.loads(msg.value())
        key = str(value["key"])
        at = msg.timestamp()[1] / 1000.0
        if key not in out or at < out[key][1]:
            out[key] = (int(value["seq"]), at)
    return out


def output_times(config: Mapping[str, Any], topic: str) -> list[tuple[str, int, float]]:
    """The job's outputs: (key, last seq counted, output time in epoch s)."""
    out = []
    for msg in _read(config, topic, [0]):
        value = json.loads(msg.value())
        if value.get("last_seq") is not None:
            out.append((str(value["key"]), int(value["last_seq"]), msg.timestamp()[1] / 1000.0))
    return out


def in_place_downtime(
    scenario: Any, expansion_id: str, *, timeout_s: float = 120.0
) -> float | None:
    """The downtime of ``scenario``'s job switching in place for ``expansion_id``: from the
    job's log (its commits and its switch) and the expansion record (when vN+1 was written);
    waits for the job's batches after the switch. None when this launch of the job did not
    run before the write (it was started on vN+1: no switch) or it did not commit 3 batches
    after its switch within ``timeout_s``."""
    from pathlib import Path

    from airflow_samza_expand._demo.jobs import wait_for
    from airflow_samza_expand.core._clock import parse_iso

    record = scenario.store.get_expansion(expansion_id)
    write = record.steps.get("write") if record is not None else None
    if write is None or not (write.started_at or write.ended_at):
        raise RuntimeError(f"expansion {expansion_id} has no write step: was vN+1 written?")
    written_at = parse_iso(write.started_at or write.ended_at).timestamp()
    log = Path(scenario.job.handle["log_path"])

    def downtime() -> float | None:
        text = log.read_text(errors="replace")
        switched = [t for t in switch_times(text) if t >= written_at - 0.01]
        return switch_downtime_s(commit_times(text), written_at, switched[0]) if switched else None

    if sum(t < written_at for t in commit_times(log.read_text(errors="replace"))) < 2:
        return None  # started on vN+1 (a relaunch): nothing switched in this launch
    try:
        wait_for(f"the job's batches after its switch in place ({log})",
                 lambda: downtime() is not None, timeout_s=timeout_s)  # fmt: skip
    except TimeoutError:
        return None
    return downtime()


def moved_key_latencies(scenario: Any) -> list[MovedKeyLatency]:
    """Per expansion of ``scenario`` (oldest first): its moved keys' latency, from the input
    topic's new partitions and the job's outputs (call it once the job processed everything)."""
    outputs = output_times(scenario.config, scenario.output_topic)
    return [
        moved_key_latency(
            first_records(scenario.config, scenario.topic, range(o.counts[0], o.counts[1])),
            outputs,
        )
        for o in scenario.outcomes
    ]


__all__ = [
    "Commit",
    "MovedKeyLatency",
    "commit_times",
    "commits",
    "first_records",
    "in_place_downtime",
    "moved_key_latency",
    "moved_key_latencies",
    "output_times",
    "switch_downtime_s",
    "switch_times",
]
