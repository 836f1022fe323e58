"""The coordinator store: the job's durable metadata over a `store._backend.Backend`.

One class holds the record semantics (docs/internals.md 'The coordinator topic') for both
backends: job models, typed expansion records, leases, the stop request, processor heartbeats,
and the legacy untyped expansion documents (`put_expansion_doc`/`get_expansion_doc`: records
written before the typed ones; the UI still reads them).

Conditional updates: every expansion record and lease record carries a `revision` (1 on
create, +1 per update). An update names the revision it read (`expected_revision`; 0 = create
only); the backend accepts exactly one update per revision (Kafka: the lowest offset; files:
exclusive create) and the store rejects the others with `StaleRevisionError` /
`LeaseHeldError` / `LeaseLostError` carrying the current record, so the caller re-reads and
decides again.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_samza_expand.core._lease import Lease, check_current
from airflow_samza_expand.core._order import JobStaleCount
from airflow_samza_expand.core._record import ExpansionRecord
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store import _lease as leases
from airflow_samza_expand.store._backend import Backend, Stored
from airflow_samza_expand.store._kinds import (
    CONTROL,
    EXPANSION,
    LEASE,
    LEGACY_EXPANSION,
    PROCESSOR,
    STALE_COUNT,
    STOP_KEY,
)
from airflow_samza_expand.store._records import (
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


class CoordinatorStore:
    """The job's durable metadata: job models, expansion records, leases, control, processors."""

    def __init__(self, backend: Backend, job_name: str, writer_id: str | None = None) -> None:
        self.backend = backend
        self.job_name = job_name
        self.writer_id = writer_id or default_writer_id()
        self._lock = threading.RLock()
        self._decoded: dict[tuple[int, int], JobModel] = {}  # (version, token) -> model

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.backend!r}, job={self.job_name!r})"

    def close(self) -> None:
        """Release clients (the store can be used again afterwards)."""
        with self._lock:
            self.backend.close()

    def __enter__(self) -> CoordinatorStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def refresh(self) -> None:
        """Bring the view up to date (Kafka: read new records to the high watermark)."""
        with self._lock:
            self.backend.refresh()

    # -- job models -------------------------------------------------------------------------

    def _decode(self, version: int, stored: Stored) -> JobModel:
        cache_key = None if stored.token is None else (version, stored.token)
        cached = self._decoded.get(cache_key) if cache_key else None
        if cached is None:
            cached = decode_model(stored.value, self.job_name, version, stored.where, stored.key)
            if cache_key:
                self._decoded[cache_key] = cached
        return cached

    def _job_model(self, version: int) -> JobModel | None:
        stored = self.backend.job_model(version)
        return None if stored is None else self._decode(version, stored)

    def _latest(self) -> JobModel | None:
        versions = self.backend.job_model_versions()
        return self._job_model(versions[-1]) if versions else None

    def latest_job_model(self) -> JobModel | None:
        """The newest job model, or None for a new job."""
        with self._lock:
            self.backend.refresh()
            return self._latest()

    def job_model(self, version: int) -> JobModel | None:
        """Job model `version`, or None."""
        with self._lock:
            self.backend.refresh()
            return self._job_model(version)

    def job_model_history(self) -> list[JobModel]:
        """Every stored job model, oldest first."""
        with self._lock:
            self.backend.refresh()
            models = (self._job_model(v) for v in self.backend.job_model_versions())
            return [m for m in models if m is not None]

    def write_job_model(self, model: JobModel) -> JobModel:
        """Store `model` as the next version; return what is stored (the same content again is
        a no-op). Refuses (InvalidJobModelError) a skipped version, another job's model and a
        FixedTasks model that breaks fixed tasks; ConcurrentExpansionError if another writer
        stored other content for the version first."""
        with self._lock:
            self.backend.refresh()
            latest = self._latest()
            same = self._job_model(model.version) if isinstance(model, JobModel) else None
            same_writer = self.backend.job_model_writer(model.version) if same else None
            stored = check_write(
                self.job_name, model, latest, same, me=self.writer_id, same_writer=same_writer
            )
            if stored is not None:
                log.info("job model v%d of %s already stored", stored.version, self.job_name)
                return stored
            claim = self.backend.claim_job_model(
                model.version, model.to_json().encode(), self.writer_id
            )
            winner = self._decode(model.version, claim.winner)
            if claim.won:
                log.info(
                    "wrote job model v%d of %s to %s", model.version, self.job_name, claim.where
                )
                return winner
            if winner.content_equals(model):
                log.info(
                    "job model v%d of %s: same content by %s",
                    model.version,
                    self.job_name,
                    claim.winner_writer,
                )
                return winner
            raise lost_race(
                self.job_name, claim.where, winner, model, claim.winner_writer, self.writer_id
            )

    # -- expansion records ------------------------------------------------------------------

    def _expansion(self, expansion_id: str) -> ExpansionRecord | None:
        found = self.backend.current(EXPANSION, expansion_id)
        if found is None:
            return None
        return decode_expansion(found.value, found.where, found.key, found.revision)

    def get_expansion(self, expansion_id: str) -> ExpansionRecord | None:
        """The current record (with its revision), or None."""
        with self._lock:
            self.backend.refresh()
            return self._expansion(expansion_id)

    def expansions(self) -> list[ExpansionRecord]:
        """Every current expansion record, newest (``created_at``) first."""
        with self._lock:
            self.backend.refresh()
            found = [r for r in map(self._expansion, self.backend.ids(EXPANSION)) if r]
            return sorted(found, key=lambda r: r.created_at, reverse=True)

    def put_expansion(
        self, record: ExpansionRecord, *, expected_revision: int, fence: Lease | None = None
    ) -> ExpansionRecord:
        """Store `record` if the stored revision is `expected_revision` (0: none stored yet);
        return it with its new revision. StaleRevisionError(current) otherwise;
        LeaseLostError when `fence` is given and its holder/epoch is no longer current;
        SecretValueError for a record holding a secret."""
        value = encode_expansion(self.job_name, record, expected_revision)
        expansion_id = record.expansion_id
        exact = self.backend.exact_fencing
        with self._lock:
            self.backend.refresh()
            lease = None if fence is None else self._lease(fence.name)
            check_update(record, expected_revision, self._expansion(expansion_id), fence, lease)
            if not self.backend.write_revision(
                EXPANSION, expansion_id, expected_revision, value, fence
            ):
                if fence is not None and exact:
                    check_current(self._lease(fence.name), fence)
                raise stale_revision(expansion_id, expected_revision, self._expansion(expansion_id))
            if fence is not None and not exact:  # a write racing a takeover may have landed
                check_current(self._lease(fence.name), fence)
            return dataclasses.replace(record, revision=expected_revision + 1)

    # -- leases -----------------------------------------------------------------------------

    def _lease(self, name: str) -> Lease | None:
        found = self.backend.current(LEASE, name)
        if found is None:
            return None
        return decode_lease(found.value, found.where, found.key, found.revision)

    def get_lease(self, name: str) -> Lease | None:
        """The lease record as stored (possibly expired or released), or None."""
        with self._lock:
            self.backend.refresh()
            return self._lease(name)

    def write_lease(self, lease: Lease, expected_revision: int) -> Lease | None:
        """Low level (use acquire/renew/release): store `lease` as the revision after
        `expected_revision`; None when another writer got there first."""
        value = encode_json(f"lease {lease.name!r}", lease.to_dict())
        with self._lock:
            self.backend.refresh()
            current = self._lease(lease.name)
            if (current.revision if current else 0) != expected_revision:
                return None
            if self.backend.write_revision(LEASE, lease.name, expected_revision, value, None):
                return dataclasses.replace(lease, revision=expected_revision + 1)
            return None

    def acquire_lease(self, name: str, holder: str, ttl_s: float | None = None) -> Lease:
        """Hold lease `name` (core._lease rules); LeaseHeldError naming the current holder.
        Without `ttl_s` the holder keeps the ttl of its own last hold (or the lease's default)."""
        return leases.acquire(self, name, holder, ttl_s)

    def renew_lease(self, lease: Lease) -> Lease:
        """Extend a held lease (same epoch); LeaseLostError if it is no longer held."""
        return leases.renew(self, lease)

    def release_lease(self, lease: Lease) -> None:
        """Give the lease up (idempotent; a no-op when it is no longer held)."""
        leases.release(self, lease)

    # -- plain records: control, processors, legacy documents -------------------------------

    def _plain(self, kind: str, key: str) -> dict | None:
        found = self.backend.read(kind, key)
        return None if found is None else decode_json(found.value, found.where, found.key)

    def _put(self, kind: str, key: str, value: bytes) -> None:
        with self._lock:
            self.backend.put(kind, key, value)

    def _delete(self, kind: str, key: str) -> None:
        with self._lock:
            self.backend.delete(kind, key)

    def request_stop(self, version: int, reason: str) -> None:
        """Ask the job running job model `version` to stop."""
        self._put(CONTROL, STOP_KEY, stop_value(version, reason))

    def stop_request(self) -> dict | None:
        """``{version, requested_at, reason}`` or None."""
        with self._lock:
            self.backend.refresh()
            return self._plain(CONTROL, STOP_KEY)

    def clear_stop(self) -> None:
        """Remove the stop request."""
        self._delete(CONTROL, STOP_KEY)

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
        consumer_group: str | None = None,
    ) -> None:
        """Record that processor `processor_id` is alive (state: kinds.PROCESSOR_STATES; role
        ``active``/``standby`` and its liveness TTL in seconds, and the input partitions its job
        model does not cover, {topic: [partition]}, and its order check's stale-placement
        counts (core._stale.StaleSummary.counts), and what it can do
        (core._liveness.CAPABILITIES), and the consumer group it commits to: each stored only
        when given)."""
        value = heartbeat_value(
            job_model_version, state, role, ttl_s, uncovered, stale_placements, capabilities,
            consumer_group,
        )  # fmt: skip
        self._put(PROCESSOR, check_id("processor_id", processor_id), value)

    def remove_processor(self, processor_id: str) -> None:
        """Tombstone a processor's record (a dead one's, once noticed); idempotent."""
        self._delete(PROCESSOR, check_id("processor_id", processor_id))

    def processors(self) -> dict[str, dict]:
        """Processor id -> its last heartbeat record."""
        with self._lock:
            self.backend.refresh()
            found = {k: self._plain(PROCESSOR, k) for k in self.backend.keys(PROCESSOR)}
            return {k: v for k, v in found.items() if v is not None}

    def put_stale_count(self, count: JobStaleCount) -> None:
        """Publish a processor's count of stale placements before an expansion's snapshot (the
        same content again is harmless: last write wins)."""
        value = encode_json("stale-count record", count.to_dict())
        self._put(STALE_COUNT, check_id("expansion_id", count.expansion_id), value)

    def stale_count(self, expansion_id: str) -> JobStaleCount | None:
        """The count a processor published for ``expansion_id``, or None."""
        with self._lock:
            self.backend.refresh()
            doc = self._plain(STALE_COUNT, check_id("expansion_id", expansion_id))
        return None if doc is None else JobStaleCount.from_dict(doc)

    def put_expansion_doc(self, expansion_id: str, record: Mapping) -> None:
        """Legacy: store an untyped expansion document (the UI reads old ones)."""
        value = encode_json("expansion record", record)
        self._put(LEGACY_EXPANSION, check_id("expansion_id", expansion_id), value)

    def get_expansion_doc(self, expansion_id: str) -> dict | None:
        """Legacy: the untyped expansion document, or None."""
        with self._lock:
            self.backend.refresh()
            return self._plain(LEGACY_EXPANSION, expansion_id)


__all__ = ["CoordinatorStore"]
