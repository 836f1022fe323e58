"""The expansion lease (docs/design.md 'Ownership, leases and fencing'): who owns a job's expansion,
and what a run that is not the owner does.

A holder is ``airflow:<dag_id>/<run_id>`` (a DAG run; its tasks and their retries share it) or
``cli:<host>/<pid>``. Every step of the owner acquires the lease again, which renews it (same
holder, same epoch), and fences its record writes with it; waits renew it on every poll. The
last step releases it. A run that finds the lease held waits (`lease_poll`) until it is
released or expires, then decides again: the expansion it joined is done -> nothing left to do.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from airflow_samza_expand.core._lease import DEFAULT_TTLS, EXPANSION_LEASE, Lease
from airflow_samza_expand.core._record import ExpansionRecord
from airflow_samza_expand.store import CoordinatorStore

DEFAULT_LEASE_TTL_S = DEFAULT_TTLS[EXPANSION_LEASE]


def airflow_holder(dag_id: str, run_id: str) -> str:
    """``airflow:<dag_id>/<run_id>``: one DAG run (all its tasks and retries)."""
    return f"airflow:{dag_id}/{run_id}"


def cli_holder() -> str:
    """``cli:<host>/<pid>``: this process."""
    return f"cli:{socket.gethostname()}/{os.getpid()}"


def take(store: CoordinatorStore, holder: str, ttl_s: float | None = None) -> Lease:
    """Acquire (or, for its holder, renew) the job's expansion lease; LeaseHeldError otherwise.

    The plan passes the run's ``lease_ttl_s``; every later step and wait passes none and so
    renews with the ttl the plan chose (a new holder without one gets the 600 s default)."""
    return store.acquire_lease(EXPANSION_LEASE, holder, None if ttl_s is None else float(ttl_s))


def give_up(store: CoordinatorStore, holder: str) -> None:
    """Release the lease if `holder` holds it (idempotent)."""
    lease = store.get_lease(EXPANSION_LEASE)
    if lease is not None and lease.held_by(holder):
        store.release_lease(lease)


def planned_by(record: ExpansionRecord) -> str | None:
    """The holder whose plan step recorded `record`."""
    return (record.results.get("plan") or {}).get("holder")


def owned_by(store: CoordinatorStore, holder: str) -> ExpansionRecord | None:
    """The newest expansion `holder` planned or took over (done or not): a rerun finds its own
    intent. A record planned by `holder` but owned by another run now was taken over
    (`taken_over`)."""
    for record in store.expansions():
        if planned_by(record) == holder or record.owner == holder:
            return record
    return None


def taken_over(record: ExpansionRecord | None, holder: str) -> bool:
    """True when `holder` planned `record` but another run owns it now: the lease expired
    while `holder` was gone, and that run took the expansion over."""
    return record is not None and planned_by(record) == holder and record.owner != holder


@dataclass(frozen=True)
class LeaseWait:
    """One look at the lease for a run that waits for it."""

    free: bool
    holder: str | None = None
    expansion_id: str | None = None  # the holder's expansion (the one a waiting run joins)
    expires_at: str | None = None

    def describe(self) -> str:
        if self.free:
            return "the expansion lease is free"
        joined = f" (expansion {self.expansion_id})" if self.expansion_id else ""
        return f"the expansion lease is held by {self.holder}{joined} until {self.expires_at}"


def lease_poll(store: CoordinatorStore, holder: str) -> LeaseWait:
    """Whether `holder` could take the lease now, and if not who holds it for what."""
    lease = store.get_lease(EXPANSION_LEASE)
    if lease is None or lease.expired() or lease.holder == holder:
        return LeaseWait(free=True)
    record = owned_by(store, lease.holder)
    return LeaseWait(
        free=False,
        holder=lease.holder,
        expansion_id=record.expansion_id if record else None,
        expires_at=lease.expires_at().isoformat(),
    )


__all__ = [
    "DEFAULT_LEASE_TTL_S",
    "LeaseWait",
    "airflow_holder",
    "cli_holder",
    "give_up",
    "lease_poll",
    "owned_by",
    "take",
]
