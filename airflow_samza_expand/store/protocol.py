"""The coordinator store interface (DESIGN section 5) and the rules shared by its implementations.

`CoordinatorStore` is a typing Protocol: `KafkaCoordinatorStore` (store.kafka) and
`FileCoordinatorStore` (store.files) implement all of it; `isinstance(store, CoordinatorStore)`
works at run time.

Conditional updates: every expansion record and lease record carries a `revision` (1 on
create, +1 per update). An update names the revision it read (`expected_revision`; 0 = create
only); the store accepts exactly one update per revision (Kafka: the lowest offset; files:
exclusive create) and rejects the others with `StaleRevisionError` / `LeaseHeldError` /
`LeaseLostError` carrying the current record, so the caller re-reads and decides again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from airflow_samza_expand.core.lease import Lease
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.core.names import coordinator_topic
from airflow_samza_expand.core.record import ExpansionRecord

JOB_MODEL = "job-model"
EXPANSION = "expansion"
LEASE = "lease"
CONTROL = "control"
PROCESSOR = "processor"
STOP_KEY = "stop"
PROCESSOR_STATES = frozenset({"starting", "standby", "running", "stopping", "stopped", "failed"})
PROCESSOR_ROLES = frozenset({"active", "standby"})


@runtime_checkable
class CoordinatorStore(Protocol):
    """The job's durable metadata: job models, expansion records, leases, control, processors."""

    job_name: str

    def latest_job_model(self) -> JobModel | None:
        """The newest job model, or None for a new job."""
        ...

    def job_model(self, version: int) -> JobModel | None:
        """Job model `version`, or None."""
        ...

    def job_model_history(self) -> list[JobModel]:
        """Every stored job model, oldest first."""
        ...

    def write_job_model(self, model: JobModel) -> JobModel:
        """Store `model` as the next version; return what is stored (the same content again is
        a no-op). Refuses (InvalidJobModelError) a skipped version, another job's model and a
        FixedTasks model that breaks rule 1.3; ConcurrentExpansionError if another writer
        stored other content for the version first."""
        ...

    def get_expansion(self, expansion_id: str) -> ExpansionRecord | None:
        """The current record (with its revision), or None."""
        ...

    def expansions(self) -> list[ExpansionRecord]:
        """Every current expansion record, newest (``created_at``) first."""
        ...

    def put_expansion(
        self, record: ExpansionRecord, *, expected_revision: int, fence: Lease | None = None
    ) -> ExpansionRecord:
        """Store `record` if the stored revision is `expected_revision` (0: none stored yet);
        return it with its new revision. StaleRevisionError(current) otherwise;
        LeaseLostError when `fence` is given and its holder/epoch is no longer current;
        SecretValueError for a record holding a secret."""
        ...

    def acquire_lease(self, name: str, holder: str, ttl_s: float | None = None) -> Lease:
        """Hold lease `name` (core.lease rules); LeaseHeldError naming the current holder.
        Without `ttl_s` the holder keeps the ttl of its own last hold (or the lease's default)."""
        ...

    def renew_lease(self, lease: Lease) -> Lease:
        """Extend a held lease (same epoch); LeaseLostError if it is no longer held."""
        ...

    def release_lease(self, lease: Lease) -> None:
        """Give the lease up (idempotent; a no-op when it is no longer held)."""
        ...

    def get_lease(self, name: str) -> Lease | None:
        """The lease record as stored (possibly expired or released), or None."""
        ...

    def request_stop(self, version: int, reason: str) -> None:
        """Ask the job running job model `version` to stop."""
        ...

    def stop_request(self) -> dict | None:
        """``{version, requested_at, reason}`` or None."""
        ...

    def clear_stop(self) -> None:
        """Remove the stop request."""
        ...

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
        """Record that processor `processor_id` is alive (state: PROCESSOR_STATES; role
        ``active``/``standby`` and its liveness TTL in seconds, and the input partitions its job
        model does not cover, {topic: [partition]}, and its order check's stale-placement
        counts (core.stale.StaleSummary.counts), and what it can do (rule 1.8,
        core.liveness.CAPABILITIES): each stored only when given)."""
        ...

    def remove_processor(self, processor_id: str) -> None:
        """Tombstone a processor's record (a dead one's, once noticed); idempotent."""
        ...

    def processors(self) -> dict[str, dict]:
        """Processor id -> its last heartbeat record."""
        ...

    def close(self) -> None:
        """Release clients (the store can be used again afterwards)."""
        ...


__all__ = [
    "CONTROL",
    "EXPANSION",
    "JOB_MODEL",
    "LEASE",
    "PROCESSOR",
    "PROCESSOR_ROLES",
    "PROCESSOR_STATES",
    "STOP_KEY",
    "CoordinatorStore",
    "coordinator_topic",
]
