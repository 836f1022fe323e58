"""The barrier's wait: the one entry point the Airflow sensor and trigger call
(docs/design.md 'The ordering barrier'). A poll renews the owner's expansion lease, starts the
producer refresh grace (stored once), then runs the barrier step (`step.barrier_poll`, or
`step.snapshot_poll` for a wait that ends at the snapshot). The deadline has one rule,
`barrier_deadline`, for poke and trigger alike.

* `BarrierWait` - what one barrier wait is: expansion, group, grace, quiet window, timeout.
* `start_barrier` - the wait's start: lease, grace, and its deadline (epoch s).
* `poll_barrier` - one look (the trigger loops over it, poke mode calls it once per poke).
* `order_verdict` - after the run, the report's order verdict (the report operator's entry:
  the scan beyond the snapshot, `evidence.scan_after_snapshot`, then `evidence.order_summary`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._protocol.barrier import evidence
from airflow_samza_expand._protocol.barrier.step import (
    DEFAULT_BARRIER_TIMEOUT_S,
    DEFAULT_PRODUCER_REFRESH_GRACE_S,
    barrier_poll,
    grace_until,
    snapshot_poll,
)
from airflow_samza_expand._protocol.ownership import take
from airflow_samza_expand._protocol.poll import Poll
from airflow_samza_expand.core._record import ExpansionRecord
from airflow_samza_expand.store import CoordinatorStore


@dataclass(frozen=True)
class BarrierWait:
    """One barrier wait. ``stale_quiet_s`` None: the barrier's default quiet window;
    ``timeout_s`` None: no deadline; ``holder``: the expansion lease's owner, renewed on every
    poll; ``snapshot_only``: the wait ends at the snapshot (the job drains it itself)."""

    expansion_id: str
    group: str
    grace_s: float = DEFAULT_PRODUCER_REFRESH_GRACE_S
    stale_quiet_s: float | None = None
    timeout_s: float | None = None
    holder: str | None = None
    snapshot_only: bool = False


def barrier_deadline(grace_ends: float, started_at: float, timeout_s: float | None) -> float | None:
    """The one deadline rule: ``timeout_s`` after the later of the wait's start and the grace's
    end (epoch s); None without a timeout."""
    if timeout_s is None:
        return None
    return max(started_at, grace_ends) + float(timeout_s)


def start_barrier(store: CoordinatorStore, wait: BarrierWait, started_at: float) -> float | None:
    """Take (or renew) the lease and start the grace; the wait's deadline (`barrier_deadline`)."""
    lease = take(store, wait.holder) if wait.holder else None
    grace_ends = grace_until(store, wait.expansion_id, float(wait.grace_s), lease=lease)
    return barrier_deadline(grace_ends, started_at, wait.timeout_s)


def poll_barrier(
    admin: KafkaAdmin, store: CoordinatorStore, wait: BarrierWait, *, deadline: float | None
) -> Poll:
    """One look at the barrier: renew the lease, the grace's end, then the step's poll. Stale
    placements still arriving at ``deadline`` refuse it (`BarrierTimeoutError`)."""
    lease = take(store, wait.holder) if wait.holder else None  # renews the owner's lease
    grace_ends = grace_until(store, wait.expansion_id, float(wait.grace_s), lease=lease)
    poll = snapshot_poll if wait.snapshot_only else barrier_poll
    return poll(
        admin,
        store,
        expansion_id=wait.expansion_id,
        group=wait.group,
        grace_ends=grace_ends,
        lease=lease,
        stale_quiet_s=wait.stale_quiet_s,
        deadline=deadline,
    )


def order_verdict(admin: KafkaAdmin, record: ExpansionRecord) -> dict[str, Any]:
    """The report's order verdict of an expansion past its snapshot: scan the old
    partitions beyond it, then the summary (`evidence.order_summary`)."""
    return evidence.order_summary(record, evidence.scan_after_snapshot(admin, record))


__all__ = [
    "DEFAULT_BARRIER_TIMEOUT_S",
    "DEFAULT_PRODUCER_REFRESH_GRACE_S",
    "BarrierWait",
    "barrier_deadline",
    "order_verdict",
    "poll_barrier",
    "start_barrier",
]
