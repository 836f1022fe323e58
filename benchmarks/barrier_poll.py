"""Cost of one ordering-barrier poll, and of reading a coordinator topic of 1,000 job models.

1. Barrier poll: a topic grows 8 -> 16 partitions, the barrier is snapshot, and a consumer group
   that never reaches it is polled with `barrier_status` in windows of 1, 10 and 50 polls (and
   once more after an idle pause). Requests are counted by the client itself (librdkafka
   statistics `tx`: every request sent to any broker) and, on the development broker, at the
   broker too (fault-table hit counters of the APIs involved). The figure is requests per poll;
   it must not grow with the number of polls or the time waited.
2. Coordinator read: 1,000 job model versions (96 SSPs each) are appended to a coordinator topic.
   The figure is a fresh `KafkaCoordinatorStore` reading the whole topic (indexing all 1,000
   versions) and returning the newest model, as every operator and the job do; models are
   decoded lazily. Decoding all 1,000 into `JobModel`s (`job_model_history()`) is printed too:
   it is dominated by `JobModel.from_json` validation (core), not by Kafka.

3. Stale-placement scan: the barrier's scan of the old partitions between the
   expansion and the snapshot. Idle polls (nothing appended) are counted like the barrier poll
   (client `tx` and broker hits, Fetch included): one ListOffsets per poll, no fetch. Then
   `--scan-records` records (half from a fresh producer, half from a stale one that still uses
   8 partitions) are appended, and the old partitions are scanned from the expansion offsets in
   bounded polls: records checked per second.

4. The barrier's look before its snapshot, the scan vs the job's count: two 8 -> 16
   expansions take `--scan-records` records each (half stale) in `--looks` rounds, one
   barrier look (`order_poll`) after each round. Without a counting processor the barrier
   scans them itself; with one (a processor heartbeating ``counts-stale``: the provider's
   reader and `spark._stale_before`, driven in this process without Spark, count them as the
   job's batches would) the barrier takes the job's count. The figures are the records the
   barrier itself read per look and the seconds per look. `--before-snapshot-only` runs only
   this part.

Uses KAFKA_BOOTSTRAP_SERVERS if set, else starts the development broker. Figures only - no
pass/fail. Last line:

    requests_per_poll=<n> coordinator_read_1000_versions_s=<x>
    stale_scan_idle_requests_per_poll=<n> stale_scan_records_per_s=<x>
    before_snapshot_scan_read_per_look=<n> before_snapshot_job_read_per_look=<n>
    before_snapshot_scan_look_s=<x> before_snapshot_job_look_s=<x>        (one line)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import threading
import time
import uuid
from contextlib import ExitStack
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand._kafka.partitioners import crc32_partition
from airflow_samza_expand._protocol.barrier.reads import barrier_status, snapshot_barrier
from airflow_samza_expand._protocol.barrier.stale_scan import StaleScanner
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore
from airflow_samza_expand.store._kafka_log import encode_key
from airflow_samza_expand.store._kinds import JOB_MODEL

STATS_INTERVAL_MS = 100


class RequestCounter:
    """Requests sent by every client of a KafkaAdmin (its AdminClient and its group-offset
    readers), from librdkafka statistics: `tx` of each client's newest report, summed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tx: dict[str, int] = {}  # client instance name -> requests sent
        self._reports = 0

    def on_stats(self, text: str) -> None:
        stats = json.loads(text)
        with self._lock:
            self._tx[stats["name"]] = int(stats.get("tx", 0))
            self._reports += 1

    def total(self, admin: KafkaAdmin) -> int:
        """Wait for fresh statistics from every client; return the requests sent so far."""
        clients = [admin._client, *admin._groups.readers.values()]  # benchmark-only peek
        with self._lock:
            wanted = self._reports + 2 * len(clients)
        deadline = time.monotonic() + 10
        while True:
            for client in clients:
                client.poll(0.02)  # serves the statistics callback
            with self._lock:
                if self._reports >= wanted or time.monotonic() > deadline:
                    return sum(self._tx.values())


def produce_all(
    config: dict[str, str], topic: str, records: list[tuple[bytes, bytes, int]]
) -> None:
    producer = Producer({**config, "acks": "all", "linger.ms": "20", "enable.idempotence": "true"})
    for key, value, partition in records:
        while True:
            try:
                producer.produce(topic, value=value, key=key, partition=partition)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(60):
        raise SystemExit("error: records left unacknowledged - is the broker healthy?")


def bench_barrier(config: dict[str, str], broker: Any, polls: list[int], idle_s: float) -> int:
    run = uuid.uuid4().hex[:8]
    topic, group = f"bench-barrier-{run}", f"bench-job-{run}"
    setup = KafkaAdmin(config, timeout_s=30)
    setup.ensure_topic(topic, 8)
    produce_all(config, topic, [(b"k%d" % i, b"v", i % 8) for i in range(800)])
    setup.create_partitions(topic, 16)
    barrier = snapshot_barrier(setup, {topic: 8})
    consumer = Consumer({**config, "group.id": group, "enable.auto.commit": "false"})
    consumer.commit(offsets=[TopicPartition(topic, p, 50) for p in range(8)], asynchronous=False)
    consumer.close()

    counter = RequestCounter()
    admin = KafkaAdmin(
        {**config, "statistics.interval.ms": str(STATS_INTERVAL_MS), "stats_cb": counter.on_stats},
        timeout_s=30,
    )
    status = barrier_status(admin, group, barrier)  # warm up: connections, metadata
    print(f"barrier: {status.describe(limit=3)}")
    if broker is not None:
        apis = ["OffsetFetch", "FindCoordinator", "Metadata", "ListOffsets", "ApiVersions"]
        for api in apis:
            broker.faults.inject(api, "delay", delay_s=0.0, times=None)  # hit counters
    per_poll: list[float] = []
    windows = [(n, 0.0) for n in polls] + [(1, idle_s)]
    for n, pause in windows:
        if pause:
            print(f"idle {pause:g} s before the next poll (a long barrier wait) ...")
            time.sleep(pause)
        base_total = counter.total(admin)
        base_hits = {a: broker.faults.hits(a) for a in apis} if broker is not None else {}
        for _ in range(n):
            status = barrier_status(admin, group, barrier)
        total = counter.total(admin)
        hits = {a: broker.faults.hits(a) - base_hits[a] for a in base_hits}
        per = (total - base_total) / n
        per_poll.append(per)
        broker_text = ""
        if hits:
            broker_text = f" broker_counted={sum(hits.values()) / n:g}/poll {hits}"
        print(f"polls={n:3d} client_requests={total - base_total} ({per:g}/poll){broker_text}")
    if broker is not None:
        broker.faults.clear()
    assert not status.holds
    return round(statistics.median(per_poll))


def bench_coordinator_read(config: dict[str, str], versions: int, runs: int) -> float:
    job = f"bench-job-{uuid.uuid4().hex[:8]}"
    base = JobModel.initial(job, {"orders": 64, "clicks": 32}, created_at="2026-01-01T00:00:00Z")
    writer = KafkaCoordinatorStore(config, job, timeout_s=30)
    writer.write_job_model(base)  # creates the compacted topic through the real path
    writer.close()
    records = [
        (
            encode_key(JOB_MODEL, str(v), "bench-writer"),
            dataclasses.replace(base, version=v).to_json().encode(),
            0,
        )
        for v in range(2, versions + 1)
    ]
    size_mb = sum(len(v) for _, v, _ in records) / 1e6
    produce_all(config, writer.topic, records)
    print(f"coordinator topic {writer.topic}: {versions} job models, {size_mb:.1f} MB of values")
    latest_s, history_s = [], []
    for _ in range(runs):
        start = time.perf_counter()
        with KafkaCoordinatorStore(config, job, timeout_s=30) as store:
            latest = store.latest_job_model()
            latest_s.append(time.perf_counter() - start)
            assert latest is not None and latest.version == versions
        start = time.perf_counter()
        with KafkaCoordinatorStore(config, job, timeout_s=30) as store:
            history = store.job_model_history()
            history_s.append(time.perf_counter() - start)
            assert [m.version for m in history] == list(range(1, versions + 1))
    print(f"fresh store -> newest model: {', '.join(f'{s:.3f}' for s in latest_s)} s")
    print(
        f"fresh store -> all {versions} models decoded: "
        f"{', '.join(f'{s:.3f}' for s in history_s)} s"
    )
    return statistics.median(latest_s)


def bench_stale_scan(
    config: dict[str, str], broker: Any, polls: list[int], idle_s: float, records: int
) -> tuple[float, float]:
    """(requests per idle scan poll, records checked per second)."""
    run = uuid.uuid4().hex[:8]
    topic = f"bench-stale-{run}"
    setup = KafkaAdmin(config, timeout_s=30)
    setup.ensure_topic(topic, 8)
    produce_all(
        config, topic, [(b"k%d" % i, b"v", crc32_partition(b"k%d" % i, 8)) for i in range(800)]
    )
    start = snapshot_barrier(setup, {topic: 8})  # the old partitions' ends at the expansion
    setup.create_partitions(topic, 16)

    counter = RequestCounter()
    admin = KafkaAdmin(
        {**config, "statistics.interval.ms": str(STATS_INTERVAL_MS), "stats_cb": counter.on_stats},
        timeout_s=30,
    )
    scanner = StaleScanner(config, {topic: (8, 16)}, "crc32", admin=admin)
    scanner.poll(start)  # warm up: connections, metadata
    apis = ["ListOffsets", "Fetch", "Metadata", "ApiVersions", "OffsetFetch"]
    if broker is not None:
        for api in apis:
            broker.faults.inject(api, "delay", delay_s=0.0, times=None)  # hit counters
    per_poll: list[float] = []
    for n, pause in [(k, 0.0) for k in polls] + [(1, idle_s)]:
        if pause:
            time.sleep(pause)
        base_total = counter.total(admin)
        base_hits = {a: broker.faults.hits(a) for a in apis} if broker is not None else {}
        for _ in range(n):
            result = scanner.poll(start)
            assert result.records_read == 0 and result.caught_up
        total = counter.total(admin)
        hits = {a: broker.faults.hits(a) - base_hits[a] for a in base_hits}
        per_poll.append((total - base_total) / n)
        broker_text = f" broker_counted={sum(hits.values()) / n:g}/poll {hits}" if hits else ""
        print(f"idle stale scan: polls={n:3d} client_requests={total - base_total} "
              f"({per_poll[-1]:g}/poll){broker_text}")  # fmt: skip
    if broker is not None:
        broker.faults.clear()
    assert scanner._consumer is None  # benchmark-only peek: idle polls never fetched

    keys = [b"user-%d" % i for i in range(1000)]
    appended = [
        (k, b'{"seq": 0}', crc32_partition(k, 8 if i % 2 else 16))  # odd: stale producer
        for i, k in ((i, keys[i % len(keys)]) for i in range(records))
    ]
    produce_all(config, topic, appended)
    began = time.perf_counter()
    positions, found, read, rounds = start, 0, 0, 0
    while True:
        result = scanner.poll(positions)
        positions, rounds = result.positions, rounds + 1
        found += len(result.placements)
        read += result.records_read
        if result.caught_up:
            break
    seconds = time.perf_counter() - began
    scanner.close()
    admin.close()
    setup.close()
    rate = read / seconds
    print(f"stale scan: {read} records in {rounds} bounded polls, {found} stale placements, "
          f"{seconds:.3f} s ({rate:,.0f} records/s)")  # fmt: skip
    return statistics.median(per_poll), rate


def bench_before_snapshot(config: dict[str, str], records: int, looks: int) -> dict[str, float]:
    """Records the barrier itself read per look, and seconds per look: scan vs job's count."""
    import tempfile

    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from airflow_samza_expand._protocol.barrier.before_snapshot import order_poll
    from airflow_samza_expand._protocol.barrier.evidence import record_scan_start
    from airflow_samza_expand.core._clock import now_iso
    from airflow_samza_expand.core._record import ExpansionRecord
    from airflow_samza_expand.spark._source import SOURCE_SCHEMA, SamzaKafkaStreamReader
    from airflow_samza_expand.spark._stale_before import BeforeSnapshotCount
    from airflow_samza_expand.store._files import FileCoordinatorStore

    figures: dict[str, float] = {}
    workdir = tempfile.mkdtemp(prefix="bench-before-")
    setup = KafkaAdmin(config, timeout_s=30)
    for mode in ("scan", "job"):
        topic = f"bench-before-{mode}-{uuid.uuid4().hex[:8]}"
        job = f"job-{topic}"
        setup.ensure_topic(topic, 8)
        store = FileCoordinatorStore(os.path.join(workdir, mode), job)
        model = store.write_job_model(JobModel.initial(job, {topic: 8}))
        stamp, eid = now_iso(), f"{job}~{topic}.8-16"
        store.put_expansion(ExpansionRecord(
            expansion_id=eid, job_name=job, base_version=1, target_version=2,
            plan={"counts_before": {topic: 8}, "counts_after": {topic: 16}}, status="planned",
            owner="bench", created_at=stamp, updated_at=stamp,
            results={"plan": {"conformance": {topic: {"partitioner": "crc32"}}}},
        ), expected_revision=0)  # fmt: skip
        record_scan_start(setup, store, eid)
        setup.create_partitions(topic, 16)
        grown = store.get_expansion(eid)
        store.put_expansion(grown.with_step("expand", started_at=stamp, ended_at=now_iso()),
                            expected_revision=grown.revision)  # fmt: skip
        expanded_at = time.time()
        reader = counter = None
        offsets = {topic: {str(p): 0 for p in range(8)}}
        if mode == "job":  # the running job: the provider's reader and its driver's count
            rule = os.path.join(workdir, "rule")
            reader = SamzaKafkaStreamReader(SOURCE_SCHEMA, {
                "job_model": model.to_json(), "stale_before_path": rule,
                "bootstrap_servers": config["bootstrap.servers"]})  # fmt: skip
            counter = BeforeSnapshotCount(
                store, threading.Lock(), "proc-1", config, os.path.join(workdir, "r"), rule
            )
            counter.poll(model, offsets)
        keys = [b"user-%d" % i for i in range(1000)]
        read, seconds = [], []
        for look in range(looks):
            produce_all(config, topic, [
                (k, b'{"seq": 0}', crc32_partition(k, 8 if i % 2 else 16))  # odd: stale
                for i, k in ((i, keys[i % len(keys)]) for i in range(records // looks))
            ])  # fmt: skip
            if reader is not None and counter is not None:
                store.heartbeat("proc-1", 1, "running", role="active", capabilities=[
                    "counts-stale", "in-place"])  # fmt: skip
                end = reader.latestOffset(offsets, ReadAllAvailable())
                for part in reader.partitions(offsets, end):
                    for _ in reader.read(part):
                        pass
                counter.after_commit(end)
                offsets = end
            began = time.perf_counter()
            poll = order_poll(
                setup, store, config, expansion_id=eid, expanded_at=expanded_at,
                grace_ends=expanded_at, deadline=None, stale_quiet_s=0.0,
            )  # fmt: skip
            seconds.append(time.perf_counter() - began)
            read.append(poll.records_read)
            print(f"{mode}: look {look + 1}: the barrier read {poll.records_read} records in "
                  f"{seconds[-1]:.3f} s; {poll.evidence.before_snapshot.records} stale so far, "
                  f"counted by {poll.counted_by}")  # fmt: skip
        if reader is not None and counter is not None:
            reader.stop()
            counter.close()
        store.close()
        figures[f"before_snapshot_{mode}_read_per_look"] = statistics.mean(read)
        figures[f"before_snapshot_{mode}_look_s"] = statistics.median(seconds)
    setup.close()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--idle-s", type=float, default=5.0, help="pause before the last poll")
    parser.add_argument("--scan-records", type=int, default=100_000)
    parser.add_argument("--looks", type=int, default=5, help="barrier looks before the snapshot")
    parser.add_argument("--before-snapshot-only", action="store_true", help="only part 4")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="CI size: 20 versions, 1 run, windows of 1 and 2 polls, 0.2 s idle, 400 scan "
        "records in 1 look (same code and last line, figures not comparable)",
    )
    args = parser.parse_args(argv)
    polls = [1, 10, 50]
    if args.smoke:
        args.versions, args.runs, args.idle_s, args.scan_records, args.looks = 20, 1, 0.2, 400, 1
        polls = [1, 2]
    with ExitStack() as stack:
        bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
        broker = None
        if not bootstrap:
            from airflow_samza_expand._testing import DevBrokerProcess

            broker = stack.enter_context(DevBrokerProcess(log_level="WARNING"))
            bootstrap = broker.bootstrap
        config = client_config(bootstrap)
        print(f"Kafka at {bootstrap} ({'development broker' if broker else 'real cluster'})")
        before = bench_before_snapshot(config, args.scan_records, args.looks)
        last = " ".join(f"{k}={v:.3f}" if k.endswith("_s") else f"{k}={v:g}"
                        for k, v in before.items())  # fmt: skip
        if args.before_snapshot_only:
            print(last)
            return 0
        requests_per_poll = bench_barrier(config, broker, polls, args.idle_s)
        read_s = bench_coordinator_read(config, args.versions, args.runs)
        scan_idle, scan_rate = bench_stale_scan(
            config, broker, polls, args.idle_s, args.scan_records
        )
    print(
        f"requests_per_poll={requests_per_poll} coordinator_read_1000_versions_s={read_s:.3f} "
        f"stale_scan_idle_requests_per_poll={scan_idle:g} stale_scan_records_per_s={scan_rate:.0f} "
        f"{last}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
