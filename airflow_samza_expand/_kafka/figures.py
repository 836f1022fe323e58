"""Live figures a growth policy decides on: partition size, produce rate, the job's lag.

Partition size is *estimated*: records in the partition (high - low watermark) times the mean
size of a sample of its newest records (key + value + headers). Kafka's DescribeLogDirs would
answer it exactly, but confluent-kafka's AdminClient does not expose that API, and a second
Kafka client only for one figure is more to install, configure and secure than an estimate that
is good enough to compare with a threshold. Rates and lag come from watermark and committed-
offset deltas over one measuring window.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from confluent_kafka import TopicPartition

from airflow_samza_expand._kafka.admin import CONSUMER_ONLY_SETTINGS, KafkaAdmin
from airflow_samza_expand._kafka.clients import Consumer
from airflow_samza_expand.core.policy import GrowthPolicy, TopicFigures

log = logging.getLogger(__name__)

SAMPLE_RECORDS = 50
SAMPLED_PARTITIONS = 3
PROGRESS_EVERY_S = 5.0


def sample_record_bytes(
    config: Mapping[str, str],
    topic: str,
    ends: Mapping[int, tuple[int, int]],
    *,
    per_partition: int = SAMPLE_RECORDS,
    timeout_s: float = 10.0,
) -> dict[int, float]:
    """Partition -> mean bytes (key + value + headers) of up to ``per_partition`` of its newest
    records, for each partition in ``ends`` (partition -> (low, high)); 0.0 when empty."""
    wanted = {p: (max(low, high - per_partition), high) for p, (low, high) in ends.items()}
    wanted = {p: r for p, r in wanted.items() if r[1] > r[0]}
    means = {p: 0.0 for p in ends}
    if not wanted:
        return means
    settings = {k: v for k, v in config.items() if k not in CONSUMER_ONLY_SETTINGS}
    settings.update({"group.id": "samza-expand-figures", "enable.auto.commit": "false"})
    consumer = Consumer(settings)
    total_bytes = {p: 0 for p in wanted}
    remaining = {p: end - start for p, (start, end) in wanted.items()}
    try:
        consumer.assign([TopicPartition(topic, p, start) for p, (start, _) in wanted.items()])
        deadline = time.monotonic() + timeout_s
        while any(n > 0 for n in remaining.values()) and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=500, timeout=0.5):
                if msg.error() is not None or remaining.get(msg.partition(), 0) <= 0:
                    continue
                if msg.offset() >= wanted[msg.partition()][1]:
                    continue
                remaining[msg.partition()] -= 1
                headers = msg.headers() or []
                total_bytes[msg.partition()] += (
                    len(msg.key() or b"")
                    + len(msg.value() or b"")
                    + sum(len(k) + len(v or b"") for k, v in headers)
                )
    finally:
        consumer.close()
    for p, (start, end) in wanted.items():
        read = end - start - remaining[p]
        means[p] = total_bytes[p] / read if read else 0.0
    return means


def measure_topic(
    admin: KafkaAdmin,
    topic: str,
    group: str,
    policy: GrowthPolicy,
    *,
    since: Mapping[int, int] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> TopicFigures:
    """Measure `topic` and `group`'s lag on it over the policy's window (logs progress).

    ``since`` (partition -> offset): size counts only records at or after it (the offsets at
    the topic's last growth); partitions it does not name count from their log start.
    """
    partitions = list(range(admin.partition_counts([topic])[topic]))
    window_s = max(policy.rate_window_s, policy.lag_growing_for_s or 0.0)
    first_ends = admin.watermarks(topic, partitions)
    first_commits = admin.committed_offsets(group, topic, partitions)
    started = clock()
    log.info(
        "measuring %s (%d partitions) and group %r for %.0f s to compare with the growth policy",
        topic,
        len(partitions),
        group,
        window_s,
    )
    while (left := window_s - (clock() - started)) > 0:
        sleep(min(left, PROGRESS_EVERY_S))
        if window_s - (clock() - started) > 0:
            log.info("measuring %s: %.0f s of %.0f s", topic, clock() - started, window_s)
    elapsed = max(clock() - started, 1e-3)
    ends = admin.watermarks(topic, partitions)
    commits = admin.committed_offsets(group, topic, partitions)

    starts = {p: max(low, (since or {}).get(p, low)) for p, (low, _) in ends.items()}
    records = {p: max(0, high - starts[p]) for p, (_, high) in ends.items()}
    rates = {p: (ends[p][1] - first_ends[p][1]) / elapsed for p in partitions}
    sampled = sorted(partitions, key=lambda p: (-records[p], p))[:SAMPLED_PARTITIONS]
    means = sample_record_bytes(admin.config, topic, {p: (starts[p], ends[p][1]) for p in sampled})
    sizes = {p: int(records[p] * means[p]) for p in sampled}
    largest = max(sampled, key=lambda p: (sizes[p], -p)) if sampled else 0
    busiest = max(partitions, key=lambda p: (rates[p], -p)) if partitions else 0
    return TopicFigures(
        topic=topic,
        partitions=len(partitions),
        largest_partition_bytes=sizes.get(largest, 0),
        largest_partition=largest,
        max_records_per_s_per_partition=round(rates.get(busiest, 0.0), 3),
        busiest_partition=busiest,
        lag_records=_lag(ends, commits),
        lag_growth_records=_lag_growth(first_ends, first_commits, ends, commits),
        window_s=round(elapsed, 3),
    )


def _lag(ends: Mapping[int, tuple[int, int]], commits: Mapping[int, int | None]) -> int | None:
    """Total lag of the group (None when it committed nothing on any partition)."""
    if all(c is None for c in commits.values()):
        return None
    total = 0
    for p, (low, high) in ends.items():
        committed = commits.get(p)
        total += max(0, high - (low if committed is None else committed))
    return total


def _lag_growth(
    first_ends: Mapping[int, tuple[int, int]],
    first_commits: Mapping[int, int | None],
    ends: Mapping[int, tuple[int, int]],
    commits: Mapping[int, int | None],
) -> int | None:
    before, after = _lag(first_ends, first_commits), _lag(ends, commits)
    if before is None or after is None:
        return None
    return after - before
