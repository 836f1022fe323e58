"""The keyed workload: a background producer with per-key sequence numbers.

Values are ``{"key": k, "seq": n}`` with ``n`` = 0, 1, 2 ... per key - the format the shipped
processor (``spark._processor.SequenceCounter``) checks. Records are placed by librdkafka's
default partitioner (``consistent_random``: CRC32 of the key % partition count), with a short
metadata refresh so the producer sees grown partition counts within ``refresh_ms``; the DAG's
producer refresh grace must be at least that (plus delivery time). One record in flight per
connection keeps each key's records in send order.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from typing import Any


class KeyedProducer:
    """Produces ``rate`` records/s round-robin over ``keys`` keys until `stop()`.

    ``produced[key]`` counts the records the broker acknowledged; ``pause()``/``resume()`` let
    a test reach a quiet point (every produced record delivered) for exact checks.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        topic: str,
        *,
        keys: int = 40,
        rate: float = 100.0,
        refresh_ms: int = 1000,
        key_prefix: str = "key",
    ) -> None:
        from airflow_samza_expand._kafka.clients import Producer

        self.topic = topic
        self.keys = [f"{key_prefix}-{i:03d}" for i in range(keys)]
        self.rate = rate
        self.refresh_ms = refresh_ms
        self._producer = Producer(
            {
                **dict(config),
                "partitioner": "consistent_random",
                "topic.metadata.refresh.interval.ms": refresh_ms,
                "metadata.max.age.ms": refresh_ms * 3,
                "max.in.flight.requests.per.connection": 1,
                "acks": "all",
                # a produce answer lost with its leader (the record appended, then the broker
                # died) is retried: without idempotence the retry appends the record again
                "enable.idempotence": True,
                "linger.ms": 5,
            }
        )
        self._next_seq = dict.fromkeys(self.keys, 0)
        self.produced = dict.fromkeys(self.keys, 0)
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._running = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._sent = 0

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.produced.values())

    def _on_delivery(self, key: str) -> Any:
        def done(err: Any, _msg: Any) -> None:
            with self._lock:
                if err is not None:
                    self.errors.append(str(err))
                else:
                    self.produced[key] += 1

        return done

    def _loop(self) -> None:
        interval = 1.0 / self.rate
        i = 0
        next_at = time.monotonic()
        while not self._stopped.is_set():
            if not self._running.is_set():
                self._producer.poll(0.05)
                next_at = time.monotonic()
                continue
            key = self.keys[i % len(self.keys)]
            i += 1
            seq = self._next_seq[key]
            self._next_seq[key] = seq + 1
            value = json.dumps({"key": key, "seq": seq}).encode()
            while True:
                try:
                    self._producer.produce(
                        self.topic,
                        key=key.encode(),
                        value=value,
                        on_delivery=self._on_delivery(key),
                    )
                    break
                except BufferError:
                    self._producer.poll(0.1)
            self._sent += 1
            self._producer.poll(0)
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                self._stopped.wait(delay)
        self._producer.flush(60)

    def start(self) -> KeyedProducer:
        self._running.set()
        self._thread = threading.Thread(target=self._loop, name="keyed-producer", daemon=True)
        self._thread.start()
        return self

    def pause(self, timeout_s: float = 60.0) -> None:
        """Stop sending and wait until every sent record is acknowledged."""
        self._running.clear()
        time.sleep(0.1)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                done = sum(self.produced.values()) + len(self.errors)
            if done >= self._sent:
                return
            time.sleep(0.05)
        raise TimeoutError(
            f"{self._sent - done} produced records not acknowledged in {timeout_s} s"
        )

    def resume(self) -> None:
        self._running.set()

    def stop(self) -> None:
        """Stop for good; every sent record is acknowledged (or failed) afterwards."""
        if self._thread is None:
            return
        self.pause()
        self._stopped.set()
        self._thread.join(60)
        self._thread = None
        self._producer = None  # drops the client's connections (confluent-kafka has no close)
        if self.errors:
            raise RuntimeError(f"{len(self.errors)} records failed: {self.errors[:3]}")

    def snapshot(self) -> dict[str, int]:
        """Records acknowledged per key so far."""
        with self._lock:
            return dict(self.produced)


def start_scenario_producer(
    config: Mapping[str, str], topic: str, cfg: Any, *, rate: float | None = None
) -> KeyedProducer:
    """The scenarios' keyed producer (``cfg.keys``, ``cfg.rate`` unless ``rate``,
    ``cfg.refresh_ms``), started."""
    return KeyedProducer(
        config, topic, keys=cfg.keys, rate=cfg.rate if rate is None else rate,
        refresh_ms=cfg.refresh_ms,
    ).start()  # fmt: skip
