"""Durable job metadata (DESIGN.md section 5): job model versions, expansions, control, processors.

Two stores share one interface, `CoordinatorStore`:

* `KafkaCoordinatorStore`: one compacted, single-partition topic per job, by default
  `__samza_coordinator_<job>`, created (``cleanup.policy=compact``) on the first write.
* `FileCoordinatorStore`: files under ``<root>/<job>/`` on a local path or an fsspec URL.

Kafka record format
-------------------
Key: UTF-8 JSON object with sorted keys and compact separators::

    {"key":"<id>","type":"expansion"}            expansion record <id>
    {"key":"stop","type":"control"}              the stop request
    {"key":"<id>","type":"processor"}            heartbeat of processor <id>
    {"key":"<N>","type":"job-model","writer":"<writer id>"}   a candidate for job model vN

Value: UTF-8 JSON (the job model is `JobModel.to_json()`); an empty value is a tombstone that
deletes the key. Records are read from the log start up to the high watermark taken when the
read starts; the last value per key wins (as compaction keeps it).

Job model records carry the writer in the key on purpose: with one key per version, compaction
would keep the *last* write, i.e. a loser's. Instead each writer's candidate survives compaction
and the candidate at the lowest offset is version N, for every reader, forever. A writer appends
its candidate only while vN-1 is newest, then reads back: if another candidate came first it
tombstones its own and raises `ConcurrentExpansionError` (or returns the winner if the content is
the same). A writer never rewrites a candidate key, so the winner's offset never moves.

Unknown record types are ignored (forward compatibility). A value that does not decode raises
`CorruptCoordinatorRecordError` naming topic, offset and key when it is asked for (values are
decoded lazily). A record whose key is not such a JSON object makes every read raise it until a
tombstone for that key is written.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import tempfile
import threading
import time
import urllib.parse
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from airflow_samza_expand.core.errors import (
    ConcurrentExpansionError,
    CorruptCoordinatorRecordError,
    ExpansionError,
    InvalidJobModelError,
)
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.kafka.admin import (
    KafkaAdmin,
    KafkaUnavailableError,
    is_unavailable,
    kafka_error_of,
    unavailable,
    without_consumer_settings,
)
from airflow_samza_expand.kafka.config import bootstrap_of

log = logging.getLogger(__name__)

JOB_MODEL = "job-model"
EXPANSION = "expansion"
CONTROL = "control"
PROCESSOR = "processor"
STOP_KEY = "stop"
PROCESSOR_STATES = frozenset({"starting", "standby", "running", "stopping", "stopped", "failed"})
PROCESSOR_ROLES = frozenset({"active", "standby"})
COORDINATOR_TOPIC_CONFIG = {"cleanup.policy": "compact"}

_LEGAL_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def coordinator_topic(job_name: str) -> str:
    """Samza's coordinator topic name of a job: `__samza_coordinator_<job>`."""
    topic = f"__samza_coordinator_{job_name}"
    if not job_name or set(job_name) - _LEGAL_TOPIC_CHARS or len(topic) > 249:
        raise ValueError(
            f"job name {job_name!r} cannot name a Kafka topic - use 1-229 characters "
            "of a-z, A-Z, 0-9, '.', '_' and '-'"
        )
    return topic


def now_iso_ms() -> str:
    """Now as ISO-8601 UTC with millisecond precision, e.g. `2026-11-22T01:02:03.123Z`."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def default_writer_id() -> str:
    """A writer id unique to this process and store instance: `<host>:<pid>:<random>`."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@runtime_checkable
class CoordinatorStore(Protocol):
    """The job's durable metadata; see docs/internal-api.md."""

    job_name: str

    def latest_job_model(self) -> JobModel | None: ...
    def job_model(self, version: int) -> JobModel | None: ...
    def job_model_history(self) -> list[JobModel]: ...
    def write_job_model(self, model: JobModel) -> JobModel: ...
    def put_expansion(self, expansion_id: str, record: Mapping) -> None: ...
    def get_expansion(self, expansion_id: str) -> dict | None: ...
    def request_stop(self, version: int, reason: str) -> None: ...
    def stop_request(self) -> dict | None: ...
    def clear_stop(self) -> None: ...
    def heartbeat(
        self,
        processor_id: str,
        job_model_version: int,
        state: str,
        *,
        role: str | None = None,
        ttl_s: float | None = None,
    ) -> None: ...
    def processors(self) -> dict[str, dict]: ...
    def remove_processor(self, processor_id: str) -> None: ...
    def close(self) -> None: ...


# -- rules shared by both stores ---------------------------------------------------------------


def _check_write(
    store_job: str,
    model: JobModel,
    latest: JobModel | None,
    same_version: JobModel | None,
    *,
    me: str,
    same_writer: str | None = None,
) -> JobModel | None:
    """Validate writing `model`; return the stored model when the write is a no-op.

    `me` names this writer and `same_writer` the writer of `same_version` (for messages).
    """
    if not isinstance(model, JobModel):
        raise InvalidJobModelError(f"write_job_model needs a JobModel, got {type(model).__name__}")
    if model.job_name != store_job:
        raise InvalidJobModelError(
            f"job model of job {model.job_name!r} cannot be written to the store of job "
            f"{store_job!r} - open the store of job {model.job_name!r}"
        )
    if same_version is not None:
        if same_version.content_equals(model):
            return same_version
        newest = max(same_version.version, latest.version if latest else 0)
        author = f"writer {same_writer!r} " if same_writer else ""
        raise ConcurrentExpansionError(
            f"job model v{model.version} of job {store_job!r} already exists with other content, "
            f"written by {author}({same_version.created_by!r}, {same_version.created_at}); this "
            f"writer {me!r} ({model.created_by!r}) wrote nothing. v{newest} is newest and stays "
            "in force - plan the expansion again from it"
        )
    expected = 1 if latest is None else latest.version + 1
    if model.version != expected:
        newest = "the store is empty" if latest is None else f"v{latest.version} is newest"
        raise InvalidJobModelError(
            f"cannot write job model v{model.version} of job {store_job!r}: {newest}, so the "
            f"next version must be v{expected} - build the model from the newest version"
        )
    return None


def _lost_race(
    store_job: str, where: str, winner: JobModel, loser: JobModel, winner_writer: str, me: str
) -> ConcurrentExpansionError:
    return ConcurrentExpansionError(
        f"two writers raced for job model v{loser.version} of job {store_job!r} in {where}: "
        f"writer {winner_writer!r} ({winner.created_by!r}, {winner.created_at}) won and its model "
        f"stays in force; this writer {me!r} ({loser.created_by!r}, {loser.created_at}) lost "
        "and wrote nothing that counts - plan the expansion again from the newest model"
    )


def _check_json(what: str, record: Mapping) -> bytes:
    try:
        return json.dumps(dict(record), sort_keys=True, separators=(",", ":")).encode()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be JSON-serialisable: {exc} - pass plain dicts") from None


def _check_id(what: str, value: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string, got {value!r}")
    return value


def _stop_value(version: int, reason: str) -> bytes:
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"stop request needs a job model version >= 1, got {version!r}")
    doc = {"version": version, "requested_at": now_iso_ms(), "reason": str(reason)}
    return _check_json("stop request", doc)


def _heartbeat_value(
    job_model_version: int, state: str, role: str | None = None, ttl_s: float | None = None
) -> bytes:
    """The processor record; ``role`` and ``ttl`` (seconds) only when given (rule 1.7)."""
    if state not in PROCESSOR_STATES:
        raise ValueError(
            f"processor state {state!r} is not one of {sorted(PROCESSOR_STATES)} - use one of them"
        )
    if isinstance(job_model_version, bool) or not isinstance(job_model_version, int):
        raise ValueError(f"job_model_version must be an int, got {job_model_version!r}")
    doc: dict[str, Any] = {
        "job_model_version": job_model_version,
        "state": state,
        "heartbeat_at": now_iso_ms(),
    }
    if role is not None:
        if role not in PROCESSOR_ROLES:
            raise ValueError(f"processor role {role!r} is not one of {sorted(PROCESSOR_ROLES)}")
        doc["role"] = role
    if ttl_s is not None:
        if isinstance(ttl_s, bool) or not isinstance(ttl_s, (int, float)) or ttl_s <= 0:
            raise ValueError(f"processor ttl_s must be a number > 0, got {ttl_s!r}")
        doc["ttl"] = float(ttl_s)
    return _check_json("heartbeat", doc)


def _decode_model(raw: bytes, job_name: str, version: int, where: str, key: str) -> JobModel:
    try:
        model = JobModel.from_json(raw)
    except InvalidJobModelError as exc:
        raise CorruptCoordinatorRecordError(
            f"corrupt job model record in {where} (key {key}): {exc} - fix or delete the "
            "record (write a tombstone for the key) and restore the model from a backup"
        ) from None
    if model.version != version or model.job_name != job_name:
        raise CorruptCoordinatorRecordError(
            f"corrupt job model record in {where} (key {key}): it holds job "
            f"{model.job_name!r} v{model.version}, expected job {job_name!r} v{version}"
        )
    return model


def _decode_json(raw: bytes, where: str, key: str) -> dict:
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptCoordinatorRecordError(
            f"corrupt coordinator record in {where} (key {key}): not JSON ({exc}) - "
            "fix or delete the record"
        ) from None
    if not isinstance(doc, dict):
        raise CorruptCoordinatorRecordError(
            f"corrupt coordinator record in {where} (key {key}): expected a JSON object, "
            f"got {type(doc).__name__}"
        )
    return doc


# -- Kafka store -------------------------------------------------------------------------------


def encode_key(record_type: str, key: str, writer: str | None = None) -> bytes:
    """The record key bytes (see the module docstring)."""
    doc = {"type": record_type, "key": key}
    if writer is not None:
        doc["writer"] = writer
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


@dataclass(frozen=True)
class _Entry:
    offset: int
    key: bytes
    value: bytes


class KafkaCoordinatorStore:
    """Coordinator store on a compacted, single-partition Kafka topic (module docstring)."""

    def __init__(
        self,
        config: Mapping[str, str],
        job_name: str,
        topic: str | None = None,
        *,
        timeout_s: float = 30.0,
        writer_id: str | None = None,
        replication_factor: int = -1,
    ) -> None:
        self.job_name = job_name
        self.topic = topic or coordinator_topic(job_name)
        self.config = dict(config)
        self.timeout_s = float(timeout_s)
        self.writer_id = writer_id or default_writer_id()
        self.replication_factor = replication_factor
        self._lock = threading.RLock()
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._topic_exists = False
        self._position = 0  # next offset to read
        self._records: dict[tuple[str, str], _Entry] = {}  # (type, key) -> newest entry
        # version -> writer -> candidate entry (tombstoned candidates removed)
        self._candidates: dict[int, dict[str, _Entry]] = {}
        self._decoded: dict[tuple[int, int], JobModel] = {}  # (version, offset) -> model
        self._key_cache: dict[bytes, tuple[str, str, str | None]] = {}
        self._corrupt_keys: dict[bytes | None, int] = {}  # unparseable key -> newest offset

    def __repr__(self) -> str:
        return (
            f"KafkaCoordinatorStore(topic={self.topic!r}, job={self.job_name!r}, "
            f"bootstrap={bootstrap_of(self.config)!r})"
        )

    # -- clients ----------------------------------------------------------------------------

    def _get_consumer(self) -> Consumer:
        if self._consumer is None:
            settings = {k: v for k, v in self.config.items() if k != "group.id"}
            settings.update(
                {
                    # librdkafka needs a group id; the reader only assign()s, never commits
                    "group.id": f"{self.topic}.reader",
                    "enable.auto.commit": "false",
                    "enable.auto.offset.store": "false",
                    "auto.offset.reset": "earliest",
                    "enable.partition.eof": "true",
                    "fetch.wait.max.ms": "10",
                    "fetch.max.bytes": "52428800",
                    "max.partition.fetch.bytes": "52428800",
                    "queued.max.messages.kbytes": "262144",
                }
            )
            self._consumer = Consumer(settings)
        return self._consumer

    def _get_producer(self) -> Producer:
        if self._producer is None:
            settings = without_consumer_settings(self.config)
            settings.update(
                {
                    "acks": "all",
                    "enable.idempotence": "true",
                    "linger.ms": "0",
                    "message.timeout.ms": str(int(self.timeout_s * 1000)),
                }
            )
            self._producer = Producer(settings)
        return self._producer

    def close(self) -> None:
        """Close the clients; the store can be used again afterwards (clients reopen)."""
        with self._lock:
            if self._consumer is not None:
                self._consumer.close()
                self._consumer = None
            if self._producer is not None:
                self._producer.flush(self.timeout_s)
                self._producer = None

    def __enter__(self) -> KafkaCoordinatorStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- reading ----------------------------------------------------------------------------

    def _check_topic(self) -> bool:
        """True if the topic exists (and has one partition); cached once it exists."""
        if self._topic_exists:
            return True
        try:
            metadata = self._get_consumer().list_topics(self.topic, timeout=self.timeout_s)
        except Exception as exc:
            error = kafka_error_of(exc)
            raise unavailable(
                f"reading metadata of coordinator topic {self.topic!r}",
                self.config,
                error.str() if error else exc,
            ) from None
        meta = metadata.topics.get(self.topic)
        if meta is None or (meta.error is not None and meta.error.code() != KafkaError.NO_ERROR):
            code = meta.error.code() if meta is not None and meta.error is not None else None
            if code in (None, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC):
                return False
            raise unavailable(
                f"reading metadata of coordinator topic {self.topic!r}",
                self.config,
                meta.error.str(),
            )
        if len(meta.partitions) != 1:
            raise ExpansionError(
                f"coordinator topic {self.topic!r} has {len(meta.partitions)} partitions; it "
                "must have exactly 1 (the log order is the store's order) - point the job at a "
                "single-partition compacted topic"
            )
        self._topic_exists = True
        return True

    def refresh(self) -> None:
        """Read new records up to the high watermark taken now (one sequential fetch loop).

        Raises CorruptCoordinatorRecordError while a record with an unparseable key is in force.
        """
        with self._lock:
            self._read_to_end()
            self._raise_if_corrupt()

    def _read_to_end(self) -> None:
        with self._lock:
            if not self._check_topic():
                return
            consumer = self._get_consumer()
            tp = TopicPartition(self.topic, 0)
            try:
                low, high = consumer.get_watermark_offsets(tp, timeout=self.timeout_s, cached=False)
            except Exception as exc:
                error = kafka_error_of(exc)
                raise unavailable(
                    f"reading the end offset of coordinator topic {self.topic!r}",
                    self.config,
                    error.str() if error else exc,
                ) from None
            if self._position < low:
                self._position = low
            if self._position >= high:
                return
            consumer.assign([TopicPartition(self.topic, 0, self._position)])
            deadline = time.monotonic() + self.timeout_s
            try:
                while self._position < high:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise unavailable(
                            f"reading coordinator topic {self.topic!r}",
                            self.config,
                            f"stuck at offset {self._position} of {high} after "
                            f"{self.timeout_s:g} s",
                        )
                    # consume() waits for the whole batch or the timeout: ask for exactly the
                    # records left (fewer only if compaction left gaps; then EOF ends it)
                    batch = max(1, min(high - self._position, 100_000))
                    for message in consumer.consume(
                        num_messages=batch, timeout=min(remaining, 0.2)
                    ):
                        error = message.error()
                        if error is not None:
                            if error.code() == KafkaError._PARTITION_EOF:
                                self._position = max(self._position, message.offset())
                                continue
                            if is_unavailable(error):
                                raise unavailable(
                                    f"reading coordinator topic {self.topic!r}",
                                    self.config,
                                    error.str(),
                                )
                            raise ExpansionError(
                                f"cannot read coordinator topic {self.topic!r}: {error.str()}"
                            )
                        # records past `high` arrive in order too: applying them is consistent
                        offset = message.offset()
                        self._apply(offset, message.key(), message.value())
                        self._position = offset + 1
            finally:
                consumer.unassign()

    def _parse_key(self, key: bytes | None) -> tuple[str, str, str | None] | None:
        """(type, key, writer) of a record key, or None if it is not a coordinator key."""
        parsed = self._key_cache.get(key) if key is not None else None
        if parsed is not None:
            return parsed
        try:
            doc = json.loads(key) if key is not None else None
        except (UnicodeDecodeError, json.JSONDecodeError):
            doc = None
        if (
            not isinstance(doc, dict)
            or not isinstance(doc.get("type"), str)
            or not isinstance(doc.get("key"), str)
            or not isinstance(doc.get("writer", ""), str)
            or (doc["type"] == JOB_MODEL and not (doc["key"].isdigit() and "writer" in doc))
        ):
            return None
        parsed = (doc["type"], doc["key"], doc.get("writer"))
        self._key_cache[key] = parsed  # type: ignore[index]
        return parsed

    def _raise_if_corrupt(self) -> None:
        """A record whose key is no coordinator key makes the store unreadable until someone
        writes a tombstone for that key (compaction then removes both)."""
        if not self._corrupt_keys:
            return
        key, offset = min(self._corrupt_keys.items(), key=lambda item: item[1])
        shown = repr(key[:80]) if key is not None else "None"
        raise CorruptCoordinatorRecordError(
            f"corrupt coordinator record in topic {self.topic!r} at offset {offset}: key "
            f"{shown} is not a coordinator key like "
            '{"key":"<id>","type":"<type>"} - write a tombstone (null value) for that key'
        )

    def _apply(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        parsed = self._parse_key(key)
        if parsed is None:
            if value:
                self._corrupt_keys[key] = offset
            else:
                self._corrupt_keys.pop(key, None)
            return
        record_type, record_key, writer = parsed
        if record_type == JOB_MODEL:
            version = int(record_key)
            candidates = self._candidates.setdefault(version, {})
            if value:
                candidates[writer or ""] = _Entry(offset, key, value)
            else:
                candidates.pop(writer or "", None)
                if not candidates:
                    del self._candidates[version]
            return
        if value:
            self._records[(record_type, record_key)] = _Entry(offset, key, value)
        else:
            self._records.pop((record_type, record_key), None)

    def _winner(self, version: int) -> tuple[str, _Entry] | None:
        candidates = self._candidates.get(version)
        if not candidates:
            return None
        return min(candidates.items(), key=lambda item: item[1].offset)

    def _where(self, entry: _Entry) -> str:
        return f"topic {self.topic!r} at offset {entry.offset}"

    def _model_of(self, version: int, entry: _Entry) -> JobModel:
        cached = self._decoded.get((version, entry.offset))
        if cached is None:
            key_text = entry.key.decode("utf-8", "replace")
            cached = _decode_model(
                entry.value, self.job_name, version, self._where(entry), key_text
            )
            self._decoded[(version, entry.offset)] = cached
        return cached

    def _cached_job_model(self, version: int) -> JobModel | None:
        winner = self._winner(version)
        return None if winner is None else self._model_of(version, winner[1])

    def _json_record(self, record_type: str, key: str) -> dict | None:
        entry = self._records.get((record_type, key))
        if entry is None:
            return None
        return _decode_json(entry.value, self._where(entry), entry.key.decode("utf-8", "replace"))

    def _latest_cached(self) -> JobModel | None:
        return self._cached_job_model(max(self._candidates)) if self._candidates else None

    def latest_job_model(self) -> JobModel | None:
        with self._lock:
            self.refresh()
            return self._latest_cached()

    def job_model(self, version: int) -> JobModel | None:
        with self._lock:
            self.refresh()
            return self._cached_job_model(version)

    def job_model_history(self) -> list[JobModel]:
        with self._lock:
            self.refresh()
            return [self._cached_job_model(v) for v in sorted(self._candidates)]  # type: ignore[misc]

    def get_expansion(self, expansion_id: str) -> dict | None:
        with self._lock:
            self.refresh()
            return self._json_record(EXPANSION, expansion_id)

    def stop_request(self) -> dict | None:
        with self._lock:
            self.refresh()
            return self._json_record(CONTROL, STOP_KEY)

    def processors(self) -> dict[str, dict]:
        with self._lock:
            self.refresh()
            keys = sorted(k for (t, k) in self._records if t == PROCESSOR)
            return {k: self._json_record(PROCESSOR, k) for k in keys}  # type: ignore[misc]

    # -- writing ----------------------------------------------------------------------------

    def _ensure_topic(self) -> None:
        if self._check_topic():
            return
        admin = KafkaAdmin(self.config, timeout_s=self.timeout_s)
        try:
            created = admin.ensure_topic(
                self.topic,
                1,
                COORDINATOR_TOPIC_CONFIG,
                replication_factor=self.replication_factor,
            )
        finally:
            admin.close()
        if created:
            log.info("created coordinator topic %s (compacted, 1 partition)", self.topic)
        deadline = time.monotonic() + self.timeout_s
        while not self._check_topic():
            if time.monotonic() > deadline:
                raise unavailable(
                    f"creating coordinator topic {self.topic!r}",
                    self.config,
                    "the topic did not appear in the metadata",
                )
            log.info("waiting for coordinator topic %s to appear in the metadata", self.topic)
            time.sleep(0.2)

    def _produce(self, key: bytes, value: bytes | None) -> int:
        """Append one record (acks=all, idempotent); return its offset."""
        self._ensure_topic()
        producer = self._get_producer()
        outcome: dict[str, Any] = {}

        def on_delivery(err: KafkaError | None, message: Any) -> None:
            outcome["error"] = err
            outcome["offset"] = message.offset() if err is None else None

        producer.produce(self.topic, value=value, key=key, partition=0, on_delivery=on_delivery)
        remaining = producer.flush(self.timeout_s + 5.0)
        if remaining or "error" not in outcome:
            raise unavailable(
                f"writing to coordinator topic {self.topic!r}",
                self.config,
                f"no acknowledgement within {self.timeout_s:g} s",
            )
        error = outcome["error"]
        if error is not None:
            if is_unavailable(error):
                raise unavailable(
                    f"writing to coordinator topic {self.topic!r}", self.config, error.str()
                )
            raise ExpansionError(f"Kafka refused a write to {self.topic!r}: {error.str()}")
        return int(outcome["offset"])

    def write_job_model(self, model: JobModel) -> JobModel:
        """Write vN+1 while vN is newest; read back; the first candidate wins (docstring)."""
        with self._lock:
            self.refresh()
            latest = self._latest_cached()
            same = self._cached_job_model(model.version) if isinstance(model, JobModel) else None
            same_winner = self._winner(model.version) if same is not None else None
            stored = _check_write(
                self.job_name,
                model,
                latest,
                same,
                me=self.writer_id,
                same_writer=same_winner[0] if same_winner else None,
            )
            if stored is not None:
                log.info(
                    "job model v%d of %s already stored; nothing to write",
                    stored.version,
                    self.job_name,
                )
                return stored
            key = encode_key(JOB_MODEL, str(model.version), self.writer_id)
            offset = self._produce(key, model.to_json().encode())
            self.refresh()
            winner = self._winner(model.version)
            if winner is not None and winner[0] == self.writer_id:
                log.info(
                    "wrote job model v%d of %s at offset %d of %s",
                    model.version,
                    self.job_name,
                    offset,
                    self.topic,
                )
                return self._model_of(model.version, winner[1])
            # Someone else's candidate came first: withdraw ours (tidiness only; readers would
            # ignore it anyway), then report.
            self._produce(key, None)
            self.refresh()
            if winner is None:  # pragma: no cover - our own record must be there
                raise ExpansionError(f"job model v{model.version} vanished from {self.topic!r}")
            winning_model = self._model_of(model.version, winner[1])
            if winning_model.content_equals(model):
                log.info(
                    "job model v%d of %s was written with the same content by %s",
                    model.version,
                    self.job_name,
                    winner[0],
                )
                return winning_model
            raise _lost_race(
                self.job_name,
                f"topic {self.topic!r} (winner at offset {winner[1].offset}, ours at {offset})",
                winning_model,
                model,
                winner[0],
                self.writer_id,
            )

    def put_expansion(self, expansion_id: str, record: Mapping) -> None:
        value = _check_json("expansion record", record)
        with self._lock:
            self._produce(encode_key(EXPANSION, _check_id("expansion_id", expansion_id)), value)

    def request_stop(self, version: int, reason: str) -> None:
        value = _stop_value(version, reason)
        with self._lock:
            self._produce(encode_key(CONTROL, STOP_KEY), value)

    def clear_stop(self) -> None:
        with self._lock:
            if self._check_topic():
                self._produce(encode_key(CONTROL, STOP_KEY), None)

    def heartbeat(
        self,
        processor_id: str,
        job_model_version: int,
        state: str,
        *,
        role: str | None = None,
        ttl_s: float | None = None,
    ) -> None:
        value = _heartbeat_value(job_model_version, state, role, ttl_s)
        with self._lock:
            self._produce(encode_key(PROCESSOR, _check_id("processor_id", processor_id)), value)

    def remove_processor(self, processor_id: str) -> None:
        """Tombstone a processor record (a dead processor's, once noticed)."""
        with self._lock:
            if self._check_topic():
                key = encode_key(PROCESSOR, _check_id("processor_id", processor_id))
                self._produce(key, None)


# -- file store --------------------------------------------------------------------------------


class _LocalFiles:
    """Atomic file operations on a local directory tree."""

    def __init__(self, root: str) -> None:
        self.root = root

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    def read(self, *parts: str) -> bytes | None:
        try:
            with open(self.path(*parts), "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def _temp(self, directory: str, data: bytes) -> str:
        os.makedirs(directory, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        return temp

    def create_exclusive(self, data: bytes, *parts: str) -> bool:
        """Write the file whole and atomically unless it exists; False if it existed."""
        target = self.path(*parts)
        temp = self._temp(os.path.dirname(target), data)
        try:
            os.link(temp, target)  # atomic and fails if the target exists
            return True
        except FileExistsError:
            return False
        finally:
            os.unlink(temp)

    def replace(self, data: bytes, *parts: str) -> None:
        target = self.path(*parts)
        os.replace(self._temp(os.path.dirname(target), data), target)

    def delete(self, *parts: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path(*parts))

    def list(self, *parts: str) -> list[str]:
        try:
            names = os.listdir(self.path(*parts))
        except FileNotFoundError:
            return []
        return [n for n in names if n.endswith(".json") and not n.startswith(".")]


class _FsspecFiles:
    """The same operations on an fsspec filesystem (exclusive create as the backend offers)."""

    def __init__(self, url: str) -> None:
        import fsspec

        self.fs, self.root = fsspec.core.url_to_fs(url)
        self.protocol = url.split("://", 1)[0]

    def path(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *parts])

    def read(self, *parts: str) -> bytes | None:
        try:
            with self.fs.open(self.path(*parts), "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def create_exclusive(self, data: bytes, *parts: str) -> bool:
        target = self.path(*parts)
        self.fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
        try:
            with self.fs.open(target, "xb") as handle:
                handle.write(data)
            return True
        except FileExistsError:
            return False
        except (NotImplementedError, ValueError):
            log.warning(
                "filesystem %s has no exclusive create; checking existence first (not atomic)",
                self.protocol,
            )
            if self.fs.exists(target):
                return False
            self.fs.pipe_file(target, data)
            return True

    def replace(self, data: bytes, *parts: str) -> None:
        target = self.path(*parts)
        self.fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
        self.fs.pipe_file(target, data)

    def delete(self, *parts: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm_file(self.path(*parts))

    def list(self, *parts: str) -> list[str]:
        try:
            entries = self.fs.ls(self.path(*parts), detail=False)
        except FileNotFoundError:
            return []
        names = [str(e).rstrip("/").rsplit("/", 1)[-1] for e in entries]
        return [n for n in names if n.endswith(".json") and not n.startswith(".")]


def _file_name(identifier: str) -> str:
    return urllib.parse.quote(identifier, safe="") + ".json"


def _identifier(file_name: str) -> str:
    return urllib.parse.unquote(file_name[: -len(".json")])


class FileCoordinatorStore:
    """Coordinator store in files: `<root>/<job>/job-model/<N>.json`, `expansion/<id>.json`,
    `control/stop.json`, `processor/<id>.json` (ids URL-quoted).

    Job model files are created exclusively (local: temp file + `os.link`, which is atomic and
    fails if the file exists; fsspec: mode "xb" where the backend supports it), so of two writers
    racing for vN+1 exactly one wins. Other records are replaced atomically (temp + `os.replace`).
    """

    def __init__(self, url_or_path: str, job_name: str) -> None:
        coordinator_topic(job_name)  # validates the name (it becomes a directory)
        self.job_name = job_name
        self.writer_id = default_writer_id()
        parsed = urllib.parse.urlparse(str(url_or_path))
        if "://" in str(url_or_path) and parsed.scheme not in ("", "file"):
            self._files: _LocalFiles | _FsspecFiles = _FsspecFiles(
                str(url_or_path).rstrip("/") + "/" + job_name
            )
        else:
            root = parsed.path if parsed.scheme == "file" else str(url_or_path)
            self._files = _LocalFiles(
                os.path.join(os.path.abspath(os.path.expanduser(root)), job_name)
            )
        self.location = self._files.path()

    def __repr__(self) -> str:
        return f"FileCoordinatorStore({self.location!r}, job={self.job_name!r})"

    def close(self) -> None:
        """Nothing to release (present for interface parity)."""

    def __enter__(self) -> FileCoordinatorStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _versions(self) -> list[int]:
        versions = []
        for name in self._files.list(JOB_MODEL):
            stem = name[: -len(".json")]
            if stem.isdigit():
                versions.append(int(stem))
        return sorted(versions)

    def job_model(self, version: int) -> JobModel | None:
        raw = self._files.read(JOB_MODEL, f"{version}.json")
        if raw is None:
            return None
        where = f"file {self._files.path(JOB_MODEL, f'{version}.json')!r}"
        return _decode_model(raw, self.job_name, version, where, f"{JOB_MODEL}:{version}")

    def latest_job_model(self) -> JobModel | None:
        versions = self._versions()
        return self.job_model(versions[-1]) if versions else None

    def job_model_history(self) -> list[JobModel]:
        models = [self.job_model(v) for v in self._versions()]
        return [m for m in models if m is not None]

    def write_job_model(self, model: JobModel) -> JobModel:
        """Write vN+1 while vN is newest, by exclusive create; the first file wins."""
        latest = self.latest_job_model()
        same = self.job_model(model.version) if isinstance(model, JobModel) else None
        stored = _check_write(self.job_name, model, latest, same, me=self.writer_id)
        if stored is not None:
            return stored
        name = f"{model.version}.json"
        if self._files.create_exclusive(model.to_json().encode(), JOB_MODEL, name):
            log.info(
                "wrote job model v%d of %s to %s",
                model.version,
                self.job_name,
                self._files.path(JOB_MODEL, name),
            )
            return model
        winner = self.job_model(model.version)
        if winner is None:  # pragma: no cover - the file existed a moment ago
            raise ExpansionError(f"job model v{model.version} vanished from {self.location!r}")
        if winner.content_equals(model):
            return winner
        raise _lost_race(
            self.job_name,
            f"{self._files.path(JOB_MODEL, name)!r}",
            winner,
            model,
            "the first writer of the file",
            self.writer_id,
        )

    def _read_json(self, folder: str, identifier: str) -> dict | None:
        name = _file_name(identifier)
        raw = self._files.read(folder, name)
        if raw is None:
            return None
        return _decode_json(
            raw, f"file {self._files.path(folder, name)!r}", f"{folder}:{identifier}"
        )

    def put_expansion(self, expansion_id: str, record: Mapping) -> None:
        value = _check_json("expansion record", record)
        self._files.replace(value, EXPANSION, _file_name(_check_id("expansion_id", expansion_id)))

    def get_expansion(self, expansion_id: str) -> dict | None:
        return self._read_json(EXPANSION, expansion_id)

    def request_stop(self, version: int, reason: str) -> None:
        self._files.replace(_stop_value(version, reason), CONTROL, _file_name(STOP_KEY))

    def stop_request(self) -> dict | None:
        return self._read_json(CONTROL, STOP_KEY)

    def clear_stop(self) -> None:
        self._files.delete(CONTROL, _file_name(STOP_KEY))

    def heartbeat(
        self,
        processor_id: str,
        job_model_version: int,
        state: str,
        *,
        role: str | None = None,
        ttl_s: float | None = None,
    ) -> None:
        value = _heartbeat_value(job_model_version, state, role, ttl_s)
        self._files.replace(value, PROCESSOR, _file_name(_check_id("processor_id", processor_id)))

    def remove_processor(self, processor_id: str) -> None:
        """Delete a processor record (a dead processor's, once noticed)."""
        self._files.delete(PROCESSOR, _file_name(_check_id("processor_id", processor_id)))

    def processors(self) -> dict[str, dict]:
        result = {}
        for name in sorted(self._files.list(PROCESSOR)):
            record = self._read_json(PROCESSOR, _identifier(name))
            if record is not None:
                result[_identifier(name)] = record
        return result


def open_store(
    uri: str, job_name: str, kafka_config: Mapping[str, str] | None = None
) -> CoordinatorStore:
    """`"kafka"` or `"kafka://<topic>"` -> KafkaCoordinatorStore; a path or fsspec URL -> files."""
    text = str(uri).strip()
    if text == "kafka" or text.startswith("kafka://"):
        if not kafka_config:
            raise ValueError(
                f"coordinator store {text!r} needs a Kafka client config - pass kafka_config "
                "(e.g. client_config(bootstrap_servers=...))"
            )
        topic = text[len("kafka://") :] if text.startswith("kafka://") else ""
        return KafkaCoordinatorStore(kafka_config, job_name, topic or None)
    if not text:
        raise ValueError(
            "empty coordinator store location - pass 'kafka', 'kafka://<topic>', a directory "
            "path or an fsspec URL"
        )
    return FileCoordinatorStore(text, job_name)


__all__ = [
    "CoordinatorStore",
    "FileCoordinatorStore",
    "KafkaCoordinatorStore",
    "KafkaUnavailableError",
    "coordinator_topic",
    "encode_key",
    "open_store",
]
