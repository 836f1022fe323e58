"""Coordinator store on a compacted, single-partition Kafka topic (format: store.kafka_log).

The topic, by default `__samza_coordinator_<job>`, is created (``cleanup.policy=compact``) on
the first write. Records are read from the log start up to the high watermark taken when the
read starts and applied in log order (store.kafka_log decides what they say).

Conditional writes (expansion records, leases): the writer appends its candidate for revision
r+1, reads to the end, and has won if its candidate is the accepted one; otherwise it writes a
tombstone for its candidate and raises (`StaleRevisionError`, `LeaseLostError`) or re-decides
(leases). The winner tombstones older revisions, so compaction keeps about one record per id.
Job models: a writer appends its candidate only while vN-1 is newest and reads back; the
lowest offset is vN forever (the loser tombstones its own and raises
`ConcurrentExpansionError`, or returns the winner if the content is the same).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_samza_expand.core.errors import ExpansionError
from airflow_samza_expand.core.lease import Lease, check_current
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.core.record import ExpansionRecord
from airflow_samza_expand.kafka.clients import Consumer, Producer
from airflow_samza_expand.kafka.config import bootstrap_of
from airflow_samza_expand.store import lease as leases
from airflow_samza_expand.store.kafka_io import TopicIO
from airflow_samza_expand.store.kafka_log import CoordinatorLog, Entry, encode_key
from airflow_samza_expand.store.protocol import (
    CONTROL,
    EXPANSION,
    LEASE,
    PROCESSOR,
    STOP_KEY,
    coordinator_topic,
)
from airflow_samza_expand.store.records import (
    check_id,
    check_update,
    check_write,
    decode_expansion,
    decode_json,
    decode_lease,
    decode_model,
    default_writer_id,
    encode_expansion,
    encode_json,
    heartbeat_value,
    lost_race,
    stale_revision,
    stop_value,
)

log = logging.getLogger(__name__)


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
        self._lock = threading.RLock()
        self._io = TopicIO(self.config, self.topic, self.timeout_s, replication_factor)
        self._log = CoordinatorLog(self.topic)
        self._decoded: dict[tuple[int, int], JobModel] = {}  # (version, offset) -> model

    def __repr__(self) -> str:
        return (
            f"KafkaCoordinatorStore(topic={self.topic!r}, job={self.job_name!r}, "
            f"bootstrap={bootstrap_of(self.config)!r})"
        )

    @property
    def replication_factor(self) -> int:
        return self._io.replication_factor

    def _get_consumer(self) -> Consumer:
        return self._io.consumer()

    def _get_producer(self) -> Producer:
        return self._io.producer()

    def close(self) -> None:
        """Close the clients; the store can be used again afterwards (clients reopen)."""
        with self._lock:
            self._io.close()

    def __enter__(self) -> KafkaCoordinatorStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- reading ----------------------------------------------------------------------------

    def refresh(self) -> None:
        """Read new records up to the high watermark taken now (one sequential fetch loop).

        Raises CorruptCoordinatorRecordError while a record with an unparseable key is in force.
        """
        with self._lock:
            self._io.read_to_end(self._log.apply)
            self._log.raise_if_corrupt()

    def _where(self, entry: Entry) -> str:
        return f"topic {self.topic!r} at offset {entry.offset}"

    def _model_of(self, version: int, entry: Entry) -> JobModel:
        cached = self._decoded.get((version, entry.offset))
        if cached is None:
            key_text = entry.key.decode("utf-8", "replace")
            cached = decode_model(entry.value, self.job_name, version, self._where(entry), key_text)
            self._decoded[(version, entry.offset)] = cached
        return cached

    def _cached_job_model(self, version: int) -> JobModel | None:
        winner = self._log.winner(version)
        return None if winner is None else self._model_of(version, winner[1])

    def _latest_cached(self) -> JobModel | None:
        candidates = self._log.candidates
        return self._cached_job_model(max(candidates)) if candidates else None

    def _json_record(self, record_type: str, key: str) -> dict | None:
        entry = self._log.records.get((record_type, key))
        if entry is None:
            return None
        return decode_json(entry.value, self._where(entry), entry.key.decode("utf-8", "replace"))

    def _accepted(self, kind: str, key: str) -> tuple[bytes, str, str, int] | None:
        """(value, where, key text, revision) of the accepted revision of (kind, key)."""
        chain = self._log.chain(kind, key)
        if chain is None or chain.current is None:
            return None
        entry = chain.current
        return entry.value, self._where(entry), entry.key.decode("utf-8", "replace"), chain.revision

    def _expansion(self, expansion_id: str) -> ExpansionRecord | None:
        found = self._accepted(EXPANSION, expansion_id)
        return None if found is None else decode_expansion(*found)

    def _lease(self, name: str) -> Lease | None:
        found = self._accepted(LEASE, name)
        return None if found is None else decode_lease(*found)

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
            models = (self._cached_job_model(v) for v in sorted(self._log.candidates))
            return [m for m in models if m is not None]

    def get_expansion(self, expansion_id: str) -> ExpansionRecord | None:
        with self._lock:
            self.refresh()
            return self._expansion(expansion_id)

    def expansions(self) -> list[ExpansionRecord]:
        with self._lock:
            self.refresh()
            ids = [key for (kind, key) in self._log.chains if kind == EXPANSION]
            found = [r for r in map(self._expansion, ids) if r is not None]
            return sorted(found, key=lambda r: r.created_at, reverse=True)

    def get_lease(self, name: str) -> Lease | None:
        with self._lock:
            self.refresh()
            return self._lease(name)

    def stop_request(self) -> dict | None:
        with self._lock:
            self.refresh()
            return self._json_record(CONTROL, STOP_KEY)

    def processors(self) -> dict[str, dict]:
        with self._lock:
            self.refresh()
            keys = sorted(k for (t, k) in self._log.records if t == PROCESSOR)
            found = {k: self._json_record(PROCESSOR, k) for k in keys}
            return {k: v for k, v in found.items() if v is not None}

    # -- writing ----------------------------------------------------------------------------

    def _produce(self, key: bytes, value: bytes | None) -> int:
        return self._io.produce([(key, value)])[0]

    def write_job_model(self, model: JobModel) -> JobModel:
        """Write vN+1 while vN is newest; read back; the first candidate wins (docstring)."""
        with self._lock:
            self.refresh()
            latest = self._latest_cached()
            same = self._cached_job_model(model.version) if isinstance(model, JobModel) else None
            same_winner = self._log.winner(model.version) if same is not None else None
            stored = check_write(
                self.job_name,
                model,
                latest,
                same,
                me=self.writer_id,
                same_writer=same_winner[0] if same_winner else None,
            )
            if stored is not None:
                log.info("job model v%d of %s already stored", stored.version, self.job_name)
                return stored
            key = encode_key("job-model", str(model.version), self.writer_id)
            offset = self._produce(key, model.to_json().encode())
            self.refresh()
            winner = self._log.winner(model.version)
            if winner is not None and winner[0] == self.writer_id:
                log.info(
                    "wrote job model v%d of %s at offset %d of %s",
                    model.version,
                    self.job_name,
                    offset,
                    self.topic,
                )
                return self._model_of(model.version, winner[1])
            # Someone else's candidate came first: withdraw ours (tidiness only), then report.
            self._produce(key, None)
            self.refresh()
            if winner is None:  # pragma: no cover - our own record must be there
                raise ExpansionError(f"job model v{model.version} vanished from {self.topic!r}")
            winning_model = self._model_of(model.version, winner[1])
            if winning_model.content_equals(model):
                log.info(
                    "job model v%d of %s: same content by %s",
                    model.version,
                    self.job_name,
                    winner[0],
                )
                return winning_model
            raise lost_race(
                self.job_name,
                f"topic {self.topic!r} (winner at offset {winner[1].offset}, ours at {offset})",
                winning_model,
                model,
                winner[0],
                self.writer_id,
            )

    def _conditional(
        self, kind: str, key: str, revision: int, value: bytes, fence: Lease | None
    ) -> bool:
        """Append `value` as revision `revision` of (kind, key); True if it is the accepted one.

        The winner tombstones obsolete candidates; a loser tombstones its own."""
        writer = f"{self.writer_id}/{uuid.uuid4().hex[:8]}"
        fenced = None if fence is None else (fence.name, fence.epoch)
        record_key = encode_key(kind, key, writer, revision=revision, fence=fenced)
        offset = self._produce(record_key, value)
        self.refresh()
        chain = self._log.chain(kind, key)
        if chain is not None and chain.current is not None and chain.current.offset == offset:
            obsolete = chain.obsolete()
            if obsolete:
                self._io.produce([(k, None) for k in obsolete])
            return True
        self._produce(record_key, None)
        return False

    def put_expansion(
        self, record: ExpansionRecord, *, expected_revision: int, fence: Lease | None = None
    ) -> ExpansionRecord:
        """Conditional update (store.protocol.CoordinatorStore.put_expansion)."""
        value = encode_expansion(self.job_name, record, expected_revision)
        expansion_id = record.expansion_id
        with self._lock:
            self.refresh()
            lease = None if fence is None else self._lease(fence.name)
            check_update(record, expected_revision, self._expansion(expansion_id), fence, lease)
            revision = expected_revision + 1
            if self._conditional(EXPANSION, expansion_id, revision, value, fence):
                return dataclasses.replace(record, revision=revision)
            if fence is not None:
                check_current(self._lease(fence.name), fence)
            raise stale_revision(expansion_id, expected_revision, self._expansion(expansion_id))

    def write_lease(self, lease: Lease, expected_revision: int) -> Lease | None:
        """Low level (use acquire/renew/release): store `lease` as the revision after
        `expected_revision`; None when another writer got there first."""
        value = encode_json(f"lease {lease.name!r}", lease.to_dict())
        with self._lock:
            self.refresh()
            current = self._lease(lease.name)
            if (current.revision if current else 0) != expected_revision:
                return None
            revision = expected_revision + 1
            if self._conditional(LEASE, lease.name, revision, value, None):
                return dataclasses.replace(lease, revision=revision)
            return None

    def acquire_lease(self, name: str, holder: str, ttl_s: float | None = None) -> Lease:
        return leases.acquire(self, name, holder, ttl_s)

    def renew_lease(self, lease: Lease) -> Lease:
        return leases.renew(self, lease)

    def release_lease(self, lease: Lease) -> None:
        leases.release(self, lease)

    def request_stop(self, version: int, reason: str) -> None:
        value = stop_value(version, reason)
        with self._lock:
            self._produce(encode_key(CONTROL, STOP_KEY), value)

    def clear_stop(self) -> None:
        with self._lock:
            if self._io.topic_exists():
                self._produce(encode_key(CONTROL, STOP_KEY), None)

    def heartbeat(
        self,
        processor_id: str,
        job_model_version: int,
        state: str,
        *,
        role: str | None = None,
        ttl_s: float | None = None,
        uncovered: Mapping[str, Sequence[int]] | None = None,
        stale_placements: Mapping[str, Any] | None = None,
        capabilities: Sequence[str] | None = None,
    ) -> None:
        value = heartbeat_value(
            job_model_version, state, role, ttl_s, uncovered, stale_placements, capabilities
        )
        with self._lock:
            self._produce(encode_key(PROCESSOR, check_id("processor_id", processor_id)), value)

    def remove_processor(self, processor_id: str) -> None:
        key = encode_key(PROCESSOR, check_id("processor_id", processor_id))
        with self._lock:
            if self._io.topic_exists():
                self._produce(key, None)

    # -- legacy untyped expansion documents (records older than typed ones; the UI reads them) -

    def put_expansion_doc(self, expansion_id: str, record: Mapping) -> None:
        value = encode_json("expansion record", record)
        with self._lock:
            self._produce(encode_key(EXPANSION, check_id("expansion_id", expansion_id)), value)

    def get_expansion_doc(self, expansion_id: str) -> dict | None:
        with self._lock:
            self.refresh()
            return self._json_record(EXPANSION, expansion_id)


__all__ = ["KafkaCoordinatorStore"]
