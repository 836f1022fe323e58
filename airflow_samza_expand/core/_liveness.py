"""Processor liveness: who is alive, who counts, who is dead.

docs/design.md 'Processors and the active lease' says why.

A processor heartbeats a record ``{job_model_version, state, heartbeat_at, role, ttl}`` into
the coordinator store. It is **alive** while its last heartbeat is younger than its ``ttl``
(seconds; `DEFAULT_TTL_S` for records written before heartbeats carried one). A processor whose
last state is not final (``starting``, ``standby``, ``running``, ``stopping``) and whose
heartbeat is older than its TTL is **dead**: it went silent (killed, host lost, SIGSTOPped).
A dead processor is never counted as an acknowledgement and never blocks a stop; whoever
notices it (the job on start, the stop step) tombstones its record. A record with a final
state (``stopped``, ``failed``) is neither: it reports how the processor ended.

Pure functions over the ``processors()`` mapping of a store; no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_samza_expand.core._clock import age_s, utc_now

DEFAULT_TTL_S = 30.0  # as Samza's Azure coordinator (liveness timeout of a processor)
ROLE_ACTIVE = "active"
ROLE_STANDBY = "standby"
ROLES = frozenset({ROLE_ACTIVE, ROLE_STANDBY})
# What a processor says it can do, in its heartbeat (docs/design.md 'How a restart is chosen'):
# wait as a warm standby for the active lease (``--standby``), switch to a newer job model in
# place, and restart its own query on a newer job model inside the same application (in-app).
CAPABILITY_STANDBY = "standby"
CAPABILITY_IN_PLACE = "in-place"
CAPABILITY_IN_APP = "in-app"
# ... and count stale placements before an expansion's snapshot in its own batches:
# the barrier then takes its count (core._order.JobStaleCount) instead of scanning
CAPABILITY_COUNTS_STALE = "counts-stale"
CAPABILITIES = frozenset(
    {CAPABILITY_STANDBY, CAPABILITY_IN_PLACE, CAPABILITY_IN_APP, CAPABILITY_COUNTS_STALE}
)
FINAL_STATES = frozenset({"stopped", "failed"})
# States in which a processor still works on its job model (a stop waits for them).
WORKING_STATES = frozenset({"starting", "standby", "running", "stopping"})


@dataclass(frozen=True)
class ProcessorStatus:
    """One processor's last heartbeat, typed."""

    processor_id: str
    job_model_version: int | None
    state: str | None
    heartbeat_at: str | None
    role: str | None = None
    ttl_s: float = DEFAULT_TTL_S
    capabilities: tuple[str, ...] = ()
    consumer_group: str | None = None  # the group it commits its processed offsets to

    @classmethod
    def from_record(cls, processor_id: str, record: Mapping[str, Any]) -> ProcessorStatus:
        version = record.get("job_model_version")
        ttl = record.get("ttl")
        capabilities = record.get("capabilities")
        group = record.get("consumer_group")
        return cls(
            processor_id=processor_id,
            job_model_version=version if isinstance(version, int) else None,
            state=record.get("state"),
            heartbeat_at=record.get("heartbeat_at"),
            role=record.get("role"),
            ttl_s=float(ttl) if isinstance(ttl, (int, float)) and ttl > 0 else DEFAULT_TTL_S,
            capabilities=tuple(sorted(str(c) for c in capabilities))
            if isinstance(capabilities, list)
            else (),
            consumer_group=group if isinstance(group, str) and group else None,
        )

    def can(self, capability: str) -> bool:
        """Whether the processor advertised ``capability``."""
        return capability in self.capabilities

    def age_s(self, now: datetime | None = None) -> float | None:
        """Seconds since the heartbeat; None when it has none or it does not parse."""
        if not self.heartbeat_at:
            return None
        try:
            return age_s(str(self.heartbeat_at), now)
        except ValueError:
            return None

    def alive(self, now: datetime | None = None) -> bool:
        """True while the heartbeat is younger than the TTL."""
        age = self.age_s(now)
        return age is not None and age < self.ttl_s

    def dead(self, now: datetime | None = None) -> bool:
        """Silent past its TTL while not in a final state."""
        return self.state not in FINAL_STATES and not self.alive(now)

    def describe(self, now: datetime | None = None) -> str:
        age = self.age_s(now)
        seen = "never" if age is None else f"{age:.0f} s ago"
        role = f" {self.role}" if self.role else ""
        return (
            f"{self.processor_id} ({self.state}{role} v{self.job_model_version}, "
            f"heartbeat {seen}, ttl {self.ttl_s:g} s)"
        )


def statuses(processors: Mapping[str, Mapping[str, Any]]) -> dict[str, ProcessorStatus]:
    """The typed view of a store's ``processors()``."""
    return {pid: ProcessorStatus.from_record(pid, rec) for pid, rec in processors.items()}


def job_consumer_group(
    job_name: str, processors: Mapping[str, Mapping[str, Any]], given: str | None = None
) -> str:
    """The consumer group holding the job's processed offsets (what the barrier, the growth
    policy and the job page read): ``given`` when set, else the group the job's processors
    advertise in their heartbeats (``--consumer-group``; the newest heartbeat wins), else the
    job name (the runtime's default)."""
    return given or advertised_group(statuses(processors).values()) or job_name


def advertised_group(processors: Iterable[Any]) -> str | None:
    """The consumer group in the newest heartbeat that names one, of processors typed with
    ``heartbeat_at`` and ``consumer_group`` (`ProcessorStatus`, the job page's rows); None."""
    advertised = [
        (str(p.heartbeat_at or ""), str(p.consumer_group)) for p in processors if p.consumer_group
    ]
    return max(advertised)[1] if advertised else None


def is_alive(record: Mapping[str, Any], now: datetime | None = None) -> bool:
    """Whether one processor record's heartbeat is younger than its TTL."""
    return ProcessorStatus.from_record("", record).alive(now)


def dead_processors(
    processors: Mapping[str, Mapping[str, Any]], now: datetime | None = None
) -> dict[str, ProcessorStatus]:
    """Processors silent past their TTL (to log, ignore and tombstone)."""
    now = now or utc_now()
    return {pid: s for pid, s in statuses(processors).items() if s.dead(now)}


def acknowledging(
    processors: Mapping[str, Mapping[str, Any]], version: int, now: datetime | None = None
) -> list[str]:
    """Live processors that run job model ``version`` as the active one (sorted ids).

    A record without a role (written before roles existed) counts when it is ``running``.
    """
    now = now or utc_now()
    return sorted(
        pid
        for pid, s in statuses(processors).items()
        if s.job_model_version == version
        and s.state == "running"
        and s.role in (None, ROLE_ACTIVE)
        and s.alive(now)
    )


def blocking_stop(
    processors: Mapping[str, Mapping[str, Any]], version: int | None, now: datetime | None = None
) -> dict[str, ProcessorStatus]:
    """Live processors of ``version`` a stop must wait for (a dead one never blocks it)."""
    now = now or utc_now()
    return {
        pid: s
        for pid, s in statuses(processors).items()
        if s.job_model_version == version and s.state in WORKING_STATES and s.alive(now)
    }


def standbys(processors: Mapping[str, Mapping[str, Any]], now: datetime | None = None) -> list[str]:
    """Live processors that report the standby role (sorted ids)."""
    now = now or utc_now()
    return sorted(
        pid for pid, s in statuses(processors).items() if s.role == ROLE_STANDBY and s.alive(now)
    )


__all__ = [
    "DEFAULT_TTL_S",
    "FINAL_STATES",
    "ROLES",
    "CAPABILITIES",
    "CAPABILITY_COUNTS_STALE",
    "CAPABILITY_IN_APP",
    "CAPABILITY_IN_PLACE",
    "CAPABILITY_STANDBY",
    "ROLE_ACTIVE",
    "ROLE_STANDBY",
    "WORKING_STATES",
    "ProcessorStatus",
    "advertised_group",
    "job_consumer_group",
    "acknowledging",
    "blocking_stop",
    "dead_processors",
    "is_alive",
    "standbys",
    "statuses",
]
