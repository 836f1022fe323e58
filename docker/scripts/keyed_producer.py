"""Sample keyed producer: JSON records {"key", "seq"} with a per-key sequence number.

Uses librdkafka's default partitioner (consistent_random: CRC32(key) % N), the `hash(key) % N`
rule the expansion relies on, so the job's SequenceCounter can show a lost, repeated or
reordered record as a sequence violation. Settings come from the environment:

  KAFKA_BOOTSTRAP_SERVERS   kafka:9092
  INPUT_TOPIC               orders
  PRODUCER_KEYS             number of distinct keys (default 50)
  PRODUCER_RATE             records per second, all keys together (default 20)
  PRODUCER_METADATA_REFRESH_MS  topic.metadata.refresh.interval.ms (librdkafka default 300000);
                            the expansion's producer_refresh_grace_s must be at least this
  PRODUCER_KEY_PREFIX       key prefix (default "user-<start time>-": a restarted producer
                            starts new keys at seq 0 instead of repeating old keys' numbers)

Logs once per PRODUCER_LOG_EVERY_S (default 10) how many records went to each partition, so the
moment the producer starts using new partitions is visible.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from typing import Any

from confluent_kafka import KafkaError

from airflow_samza_expand._kafka.clients import Producer  # librdkafka's lines: Python logging

log = logging.getLogger("keyed_producer")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, str(default))
    try:
        value = int(raw)
    except ValueError:
        raise SystemExit(
            f"error: {name}={raw!r} is not an integer - e.g. {name}={default}"
        ) from None
    if value < 0:
        raise SystemExit(f"error: {name} must be >= 0, got {value}")
    return value


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "kafka:9092")
    topic = os.environ.get("INPUT_TOPIC", "orders")
    n_keys = max(1, env_int("PRODUCER_KEYS", 50))
    rate = max(1, env_int("PRODUCER_RATE", 20))
    refresh_ms = env_int("PRODUCER_METADATA_REFRESH_MS", 300_000)
    log_every = max(1, env_int("PRODUCER_LOG_EVERY_S", 10))
    prefix = os.environ.get("PRODUCER_KEY_PREFIX") or f"user-{int(time.time()):x}-"

    failures: list[str] = []
    per_partition: dict[int, int] = {}

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            failures.append(err.str())
        else:
            per_partition[msg.partition()] = per_partition.get(msg.partition(), 0) + 1

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "partitioner": "consistent_random",  # librdkafka's default, stated for clarity
            "enable.idempotence": "true",  # no duplicates or reordering on retries
            "acks": "all",
            "linger.ms": "5",
            "topic.metadata.refresh.interval.ms": str(refresh_ms),
        }
    )
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info(
        "producing to %s at %s: %d keys (%s0..%s%d), %d records/s, metadata refresh %d ms",
        topic,
        bootstrap,
        n_keys,
        prefix,
        prefix,
        n_keys - 1,
        rate,
        refresh_ms,
    )
    seqs = [0] * n_keys
    sent = 0
    interval = 1.0 / rate
    next_send = time.monotonic()
    next_log = next_send + log_every
    while not stopping:
        i = sent % n_keys
        key = f"{prefix}{i}"
        value = json.dumps({"key": key, "seq": seqs[i]}, separators=(",", ":"))
        try:
            producer.produce(topic, key=key.encode(), value=value.encode(), on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.5)
            continue
        seqs[i] += 1
        sent += 1
        producer.poll(0)
        now = time.monotonic()
        if now >= next_log:
            log.info(
                "sent %d records; delivered per partition %s; failures %d",
                sent,
                dict(sorted(per_partition.items())),
                len(failures),
            )
            if failures:
                log.warning("last delivery failure: %s", failures[-1])
            next_log = now + log_every
        next_send += interval
        delay = next_send - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            next_send = time.monotonic()
    remaining = producer.flush(30)
    log.info(
        "stopped after %d records (undelivered %d); per partition %s; last seq per key %s",
        sent,
        remaining,
        dict(sorted(per_partition.items())),
        {f"{prefix}{i}": s - 1 for i, s in enumerate(seqs) if s},
    )
    return 1 if remaining or failures else 0


if __name__ == "__main__":
    sys.exit(main())
