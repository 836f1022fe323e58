"""Where a job and its expansions stand, for an operator (``samza-expand status``): the job
model, the processors (role, state, version, capabilities, liveness), the leases, a stop
request, every expansion with its status and current step, and what to do next. Read from the
coordinator store (and the input topics' partition counts from Kafka); writes nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from airflow_samza_expand.core._clock import age_s, parse_iso, utc_now
from airflow_samza_expand.core._lease import EXPANSION_LEASE, Lease
from airflow_samza_expand.core._liveness import ROLE_ACTIVE, ProcessorStatus, statuses
from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store import CoordinatorStore

S = ExpansionStatus


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
        }


def read_status(
    store: CoordinatorStore, where: str, live_counts: Mapping[str, int] | None = None
) -> JobStatus:
    """Read the job's records from `store` (one refresh per kind; nothing written)."""
    leases = [store.get_lease(EXPANSION_LEASE)]
    processors = sorted(statuses(store.processors()).values(), key=lambda p: p.processor_id)
    return JobStatus(
        job_name=store.job_name,
        store=where,
        models=store.job_model_history(),
        processors=processors,
        leases=[lease for lease in leases if lease is not None],
        stop=store.stop_request(),
        expansions=store.expansions(),
        live_counts=dict(live_counts or {}),
    )


def current_step(record: ExpansionRecord) -> str | None:
    """The step under way (started, not ended), else the step that ended last."""
    running = [(t.started_at or "", n) for n, t in record.steps.items() if not t.ended_at]
    if running:
        return f"{max(running)[1]} (running)"
    ended = [(t.ended_at or "", n) for n, t in record.steps.items() if t.ended_at]
    return f"{max(ended)[1]} (ended)" if ended else None


def _last_failure(record: ExpansionRecord) -> Mapping[str, Any] | None:
    failures = [f for f in record.results.get("failures") or [] if isinstance(f, Mapping)]
    return failures[-1] if failures else None


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
    """What an operator does next, most urgent first (always at least one line)."""
    now = now or utc_now()
    job, latest = status.job_name, status.latest
    if latest is None:
        return [
            f"job {job} has no job model: write v1 with `samza-expand init-job --job-name {job} "
            "--topic <input topic> --bootstrap-servers <kafka>`, then start the job"
        ]
    steps = [_expansion_step(r, status, now) for r in status.expansions if r.status != S.COMPLETED]
    steps = [s for s in steps if s]
    live = [p for p in status.processors if p.alive(now) and p.state not in ("stopped", "failed")]
    dead = [p.processor_id for p in status.processors if p.dead(now)]
    if dead:
        steps.append(
            f"processor(s) {', '.join(dead)} went silent: restart them if they should run (their "
            "records are removed by the next stop step or job start)"
        )
    if status.stop and any(p.job_model_version == status.stop.get("version") for p in live):
        steps.append(
            f"a stop of v{status.stop.get('version')} is requested: its processors stop at their "
            "next batch"
        )
    if not live and not steps:
        steps.append(
            f"no processor of job {job} runs: start the job (it reads job model v{latest.version})"
        )
    old = sorted({str(p.job_model_version) for p in live if p.job_model_version != latest.version})
    if old and not any(r.status != S.COMPLETED for r in status.expansions):
        steps.append(
            f"processors run v{', v'.join(old)}, older than the newest v{latest.version}: restart "
            "them (a job on the runtime takes the newest job model when it starts)"
        )
    grown = {
        s: n for s, n in status.live_counts.items() if n != latest.partition_counts().get(s, n)
    }
    if grown and not any(r.status != S.COMPLETED for r in status.expansions):
        steps.append(
            f"input topic(s) {grown} grew outside an expansion (job model v{latest.version} "
            f"reads {latest.partition_counts()}): the new partitions are not read - trigger the "
            "expansion DAG with those counts as targets"
        )
    return steps or [
        f"nothing to do: job {job} runs job model v{latest.version}. To grow an input topic, "
        "trigger the job's expansion DAG (its trigger form asks for the growth factor)"
    ]


def _expansion_step(r: ExpansionRecord, status: JobStatus, now: datetime) -> str | None:
    lease = next((x for x in status.leases if x.name == EXPANSION_LEASE), None)
    held = lease is not None and not lease.expired(now)
    where = f"expansion {r.expansion_id} ({r.status.value}, step {current_step(r) or '-'})"
    failure = _last_failure(r)
    if r.status == S.FAILED or (failure and not held):
        said = f": {failure.get('step')} failed at {failure.get('at')}" if failure else ""
        return (
            f"{where} stopped{said} - remove the cause (the DAG run's log says it), then clear "
            "the failed task of that DAG run; each step finds its own work done and goes on"
        )
    if held and lease is not None:
        return f"{where} is under way (run {lease.holder}): watch its DAG run or the job page"
    if _stale(r.updated_at, now):
        return (
            f"{where} has no run working on it: clear its DAG run's failed task, or trigger "
            "the expansion DAG again with the same targets - it resumes from this status"
        )
    return f"{where} is under way: watch its DAG run or the job page"


def _stale(iso: str, now: datetime, after_s: float = 600.0) -> bool:
    try:
        return (now - parse_iso(iso)).total_seconds() > after_s
    except ValueError:
        return False


__all__ = ["JobStatus", "current_step", "next_steps", "read_status", "render"]
