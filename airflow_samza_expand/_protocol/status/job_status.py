"""Where a job and its expansions stand, for an operator (``samza-expand status``): the job
model, the processors (role, state, version, capabilities, liveness), the leases, a stop
request, every expansion with its status and current step, and what to do next. Read from the
coordinator store (and the input topics' partition counts from Kafka); writes nothing."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from airflow_samza_expand._protocol.restart import waits_for_drain
from airflow_samza_expand._protocol.status.next_action import DONE, current_step, next_actions
from airflow_samza_expand.core._clock import age_s, utc_now
from airflow_samza_expand.core._lease import EXPANSION_LEASE, Lease
from airflow_samza_expand.core._liveness import (
    ROLE_ACTIVE,
    ProcessorStatus,
    job_consumer_group,
    statuses,
)
from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store import CoordinatorStore


@dataclass(frozen=True)
class JobStatus:
    """The facts `samza-expand status` shows, read at one moment."""

    job_name: str
    store: str  # where the coordinator store is, for the reader
    models: Sequence[JobModel]  # oldest first
    processors: Sequence[ProcessorStatus]
    leases: Sequence[Lease]
    stop: Mapping[str, Any] | None
    expansions: Sequence[ExpansionRecord]  # newest first
    live_counts: Mapping[str, int] = field(default_factory=dict)  # input topics on Kafka
    # the lag per old partition (topic -> partition -> lag) of the barrier of expansion
    # `barrier_of`, read while it waits there (None: not read)
    barrier_lag: Mapping[str, Mapping[int, int]] | None = None
    barrier_of: str | None = None

    @property
    def latest(self) -> JobModel | None:
        return self.models[-1] if self.models else None

    def to_dict(self, now: datetime | None = None) -> dict[str, Any]:
        now = now or utc_now()
        latest = self.latest
        return {
            "job_name": self.job_name,
            "store": self.store,
            "job_model": None
            if latest is None
            else {
                "version": latest.version,
                "grouper": latest.grouper,
                "tasks": len(latest.tasks()),
                "partition_counts": latest.partition_counts(),
            },
            "live_partition_counts": dict(self.live_counts),
            "processors": [
                {
                    "processor_id": p.processor_id,
                    "role": p.role,
                    "state": p.state,
                    "job_model_version": p.job_model_version,
                    "capabilities": list(p.capabilities),
                    "consumer_group": p.consumer_group,
                    "heartbeat_at": p.heartbeat_at,
                    "alive": p.alive(now),
                    "dead": p.dead(now),
                }
                for p in self.processors
            ],
            "leases": [{**lease.to_dict(), "expired": lease.expired(now)} for lease in self.leases],
            "stop": dict(self.stop) if self.stop else None,
            "expansions": [
                {
                    "expansion_id": r.expansion_id,
                    "status": r.status.value,
                    "versions": [r.base_version, r.target_version],
                    "grown": {s: list(c) for s, c in r.grown_counts().items()},
                    "step": current_step(r),
                    "owner": r.owner,
                    "updated_at": r.updated_at,
                }
                for r in self.expansions
            ],
            "next": next_steps(self, now),
            "next_action": next_actions(self, now)[0].to_dict(),
        }


def read_status(
    store: CoordinatorStore,
    where: str,
    live_counts: Mapping[str, int] | None = None,
    barrier_lag: Callable[[ExpansionRecord, str], Mapping[str, Mapping[int, int]] | None]
    | None = None,
) -> JobStatus:
    """Read the job's records from `store` (one refresh per kind; nothing written);
    `barrier_lag(record, group)`: the lag of the current expansion's barrier, read only while
    it waits there for the job to drain."""
    leases = [store.get_lease(EXPANSION_LEASE)]
    raw = store.processors()
    processors = sorted(statuses(raw).values(), key=lambda p: p.processor_id)
    expansions = store.expansions()
    current = draining(expansions)
    lag, of = None, None
    if current is not None and barrier_lag is not None:
        lag = barrier_lag(current, job_consumer_group(store.job_name, raw))
        of = current.expansion_id if lag is not None else None
    return JobStatus(
        job_name=store.job_name,
        store=where,
        models=store.job_model_history(),
        processors=processors,
        leases=[lease for lease in leases if lease is not None],
        stop=store.stop_request(),
        expansions=expansions,
        live_counts=dict(live_counts or {}),
        barrier_lag=lag,
        barrier_of=of,
    )


def draining(expansions: Sequence[ExpansionRecord]) -> ExpansionRecord | None:
    """The current expansion when it waits at its barrier for the job to drain (its lag is
    worth reading): status barrier-snapshot, a barrier taken, a restart that waits for it."""
    current = next((r for r in expansions if r.status not in DONE), None)
    if current is None or current.status != ExpansionStatus.BARRIER_SNAPSHOT or not current.barrier:
        return None
    return current if waits_for_drain(current) else None


def _ago(iso: str | None, now: datetime) -> str:
    if not iso:
        return "never"
    try:
        return f"{age_s(iso, now):.0f} s ago"
    except ValueError:
        return str(iso)


def render(status: JobStatus, now: datetime | None = None) -> list[str]:
    """The lines `samza-expand status` prints."""
    now = now or utc_now()
    lines = [f"job {status.job_name} (coordinator store: {status.store})"]
    latest = status.latest
    if latest is None:
        lines.append("job model: none")
    else:
        lines.append(
            f"job model: v{latest.version} (of {len(status.models)} stored), grouper "
            f"{latest.grouper}, {len(latest.tasks())} tasks"
        )
        for stream, count in sorted(latest.partition_counts().items()):
            live = status.live_counts.get(stream)
            on_kafka = "" if live is None else f" (on Kafka: {live})"
            lines.append(f"  {stream}: {count} partitions{on_kafka}")
    lines.append("processors:" if status.processors else "processors: none")
    for p in status.processors:
        alive = "DEAD (silent past its ttl)" if p.dead(now) else ("alive" if p.alive(now) else "-")
        can = ", ".join(p.capabilities) or "nothing advertised"
        lines.append(
            f"  {p.processor_id}: {p.role or '-'} {p.state} v{p.job_model_version}, heartbeat "
            f"{_ago(p.heartbeat_at, now)} (ttl {p.ttl_s:g} s, {alive}); can: {can}"
            + (f"; commits to group {p.consumer_group}" if p.consumer_group else "")
        )
    active = [p.processor_id for p in status.processors if p.role == ROLE_ACTIVE and p.alive(now)]
    lines.append("leases:")
    lines.append(f"  active: {', '.join(active) or 'no live processor holds it'}")
    for lease in status.leases:
        lines.append(f"  {lease.name}: {_lease_state(lease, now)}")
    if status.stop:
        lines.append(
            f"stop requested: v{status.stop.get('version')} at {status.stop.get('requested_at')}"
            f" ({status.stop.get('reason')})"
        )
    lines.append("expansions (newest first):" if status.expansions else "expansions: none")
    for r in status.expansions:
        grown = ", ".join(f"{s} {a} -> {b}" for s, (a, b) in r.grown_counts().items())
        lines.append(
            f"  {r.expansion_id}: {r.status.value}, v{r.base_version} -> v{r.target_version}"
            f" ({grown or 'no stream grows'}); step {current_step(r) or '-'}; updated "
            f"{_ago(r.updated_at, now)}"
        )
    lines.append("next:")
    lines += [f"  - {step}" for step in next_steps(status, now)]
    return lines


def _lease_state(lease: Lease, now: datetime) -> str:
    if lease.released:
        return f"released by {lease.holder} (epoch {lease.epoch})"
    if lease.expired(now):
        return f"EXPIRED: {lease.holder} stopped renewing it {_ago(lease.renewed_at, now)}"
    left = (lease.expires_at() - now).total_seconds()
    return f"held by {lease.holder} (epoch {lease.epoch}, expires in {left:.0f} s)"


def next_steps(status: JobStatus, now: datetime | None = None) -> list[str]:
    """What an operator does next, most urgent first (always at least one line): the sentences
    of `next_action.next_actions`, the decision the job page's top line shows too."""
    return [action.text for action in next_actions(status, now)]


__all__ = ["JobStatus", "draining", "next_steps", "read_status", "render"]
