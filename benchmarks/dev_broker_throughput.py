"""Throughput and memory of the development Kafka broker through confluent-kafka.

Produces N records of S bytes (default 200,000 x 100 B) to a fresh topic, then consumes them all,
and prints records/s and MB/s each way plus the broker's peak RSS (VmHWM). The broker runs as a
subprocess exactly as in the tests. Figures only - no pass/fail. Last line:

    produce_rps=<x> consume_rps=<y> peak_rss_mb=<z>
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from airflow_samza_expand._testing import DevBrokerProcess


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def produce(bootstrap: str, topic: str, count: int, size: int, acks: str) -> float:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "acks": acks,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    payload = os.urandom(size)
    failed = []

    def on_delivery(err, _msg) -> None:
        if err is not None:
            failed.append(err)

    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(
                    topic, value=payload, key=b"%d" % (i % 1000), on_delivery=on_delivery
                )
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    elapsed = time.perf_counter() - start
    if left or failed:
        raise SystemExit(f"produce failed: {left} undelivered, errors {failed[:3]}")
    return elapsed


def consume(bootstrap: str, topic: str, partitions: int, count: int) -> float:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    start = time.perf_counter()
    deadline = time.monotonic() + 300
    while got < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"consume timed out after {got} of {count} records")
        for msg in consumer.consume(10_000, 1.0):
            if msg.error() is None:
                got += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100, help="value bytes per record")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--acks", default="1", choices=["0", "1", "all"])
    parser.add_argument(
        "--data-dir",
        action="store_true",
        help="run the broker with --data-dir (logs on disk) in a temp dir",
    )
    parser.add_argument(
        "--smoke", action="store_true", help="CI size: 2,000 records (same code and last line)"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.records = 2_000
    if args.records <= 0 or args.size <= 0 or args.partitions <= 0:
        print("error: --records, --size and --partitions must be positive", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data" if args.data_dir else None
        with DevBrokerProcess(data_dir=data_dir) as broker:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            for fut in admin.create_topics([NewTopic("bench", args.partitions, 1)]).values():
                fut.result()
            mb = args.records * args.size / 1e6
            t_produce = produce(broker.bootstrap, "bench", args.records, args.size, args.acks)
            t_consume = consume(broker.bootstrap, "bench", args.partitions, args.records)
            assert broker.pid is not None
            rss = peak_rss_mb(broker.pid)
    produce_rps = args.records / t_produce
    consume_rps = args.records / t_consume
    print(
        f"records={args.records} size={args.size}B partitions={args.partitions} "
        f"acks={args.acks} storage={'disk' if args.data_dir else 'memory'}"
    )
    print(f"produce: {t_produce:.2f}s {produce_rps:,.0f} rec/s {mb / t_produce:.1f} MB/s")
    print(f"consume: {t_consume:.2f}s {consume_rps:,.0f} rec/s {mb / t_consume:.1f} MB/s")
    print(f"broker peak RSS: {rss:.1f} MB")
    print(f"produce_rps={produce_rps:.0f} consume_rps={consume_rps:.0f} peak_rss_mb={rss:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
