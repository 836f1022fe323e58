"""The barrier's look before its snapshot (docs/design.md 'Stale placements'): stale placements in
the old partitions since the growth, and whether the barrier may snapshot now.

* `order_poll` - one look: the counts (`evidence.scan_before_snapshot`) and the decision
  (`core._order.decide_snapshot`: wait, snapshot or timeout).
* `order_wait` - the barrier step's use of it (`_protocol.barrier.step.snapshot_poll`): None
  when it may snapshot, a waiting `Poll` otherwise, `BarrierTimeoutError` past its deadline.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._protocol.barrier import evidence
from airflow_samza_expand._protocol.barrier.rule import BarrierDecision, decide_snapshot
from airflow_samza_expand._protocol.barrier.stale_scan import StaleScanner
from airflow_samza_expand._protocol.poll import Poll
from airflow_samza_expand.core._clock import parse_iso, to_iso
from airflow_samza_expand.core._lease import Lease
from airflow_samza_expand.core._liveness import CAPABILITY_COUNTS_STALE, acknowledging, statuses
from airflow_samza_expand.core._order import (
    DEFAULT_STALE_QUIET_S,
    SCAN_SOURCE,
    JobStaleCount,
    OrderEvidence,
)
from airflow_samza_expand.core._record import ExpansionRecord
from airflow_samza_expand.core._stale import StalePlacement
from airflow_samza_expand.core.errors import BarrierTimeoutError
from airflow_samza_expand.store import CoordinatorStore


@dataclass(frozen=True)
class OrderPoll:
    """One look before the snapshot: the decision, what the barrier's own scan found and read
    this time (nothing when it took the job's count) and who counted (``counted_by``)."""

    decision: BarrierDecision
    evidence: OrderEvidence
    found: tuple[StalePlacement, ...]
    records_read: int
    counted_by: str = SCAN_SOURCE


def job_count(store: CoordinatorStore, record: ExpansionRecord) -> JobStaleCount | None:
    """The count of stale placements the job's live active processor publishes for
    ``record`` (`spark._stale_before`), when it advertises ``counts-stale`` and runs
    the job model the expansion grows; None otherwise (the barrier scans)."""
    if not hasattr(store, "stale_count"):
        return None
    processors = store.processors()
    status = statuses(processors)
    counting = {
        pid
        for pid in acknowledging(processors, record.base_version)  # live, active, running it
        if status[pid].can(CAPABILITY_COUNTS_STALE)
    }
    if not counting:
        return None
    count = store.stale_count(record.expansion_id)
    if count is None or count.processor_id not in counting:
        return None
    return count


def order_poll(
    admin: KafkaAdmin,
    store: CoordinatorStore,
    kafka_config: Mapping[str, str],
    *,
    expansion_id: str,
    expanded_at: float,
    grace_ends: float,
    deadline: float | None,
    stale_quiet_s: float = DEFAULT_STALE_QUIET_S,
    lease: Lease | None = None,
    scanner: StaleScanner | None = None,
    now: float | None = None,
) -> OrderPoll:
    """Look at what was appended to the old partitions since the last poll and store the
    counts, then decide whether the barrier may snapshot (`core._order.decide_snapshot`: wait,
    snapshot or timeout). Only while there is no snapshot.

    The look: the count of the job's own processor (`job_count`, `evidence.take_job_count`) when
    it has one, else a scan of its own (bounded, `evidence.scan_before_snapshot`)."""
    now = datetime.now(UTC).timestamp() if now is None else now
    stamp = to_iso(datetime.fromtimestamp(now, UTC))
    record = store.get_expansion(expansion_id)
    # without a scan start the scan records it first (the job counts from it on)
    ready = record is not None and evidence.evidence_of(record).scan_start
    count = job_count(store, record) if ready else None  # type: ignore[arg-type]
    found: tuple[StalePlacement, ...] = ()
    read = 0
    if count is not None:
        stored, coverage = evidence.take_job_count(admin, store, expansion_id, count, lease=lease)
        caught_up, backlog = coverage.caught_up, coverage.backlog
    else:
        stored, result = evidence.scan_before_snapshot(
            admin, store, kafka_config, expansion_id, stamp, lease=lease, scanner=scanner
        )
        caught_up, backlog = result.caught_up, result.backlog()
        found, read = result.placements, result.records_read
    last = stored.last_stale_at
    decision = decide_snapshot(
        now=now,
        expanded_at=expanded_at,
        grace_ends=grace_ends,
        deadline=deadline,
        stale_quiet_s=stale_quiet_s,
        last_stale_at=parse_iso(last).timestamp() if last else None,
        stale_records=stored.before_snapshot.records,
        caught_up=caught_up,
        backlog=backlog,
    )
    return OrderPoll(decision, stored, found, read, stored.counted_by)


def order_wait(
    admin: KafkaAdmin,
    store: CoordinatorStore,
    record: ExpansionRecord,
    expanded_at: float,
    grace_ends: float,
    *,
    lease: Lease | None,
    stale_quiet_s: float | None,
    deadline: float | None,
) -> Poll | None:
    """The look for stale placements before the snapshot: None when the barrier may snapshot
    now (the step's `snapshot_poll` then takes the snapshot); else the `Poll` to wait with.
    ``expanded_at``: when the grace started (epoch s)."""
    if stale_quiet_s is None:
        stale_quiet_s = min(DEFAULT_STALE_QUIET_S, max(grace_ends - expanded_at, 0.0))
    check = order_poll(
        admin, store, admin.config, expansion_id=record.expansion_id, expanded_at=expanded_at,
        grace_ends=grace_ends, deadline=deadline, stale_quiet_s=stale_quiet_s, lease=lease,
    )  # fmt: skip
    decision = check.decision
    if decision.action == "snapshot":
        return None
    if decision.action == "timeout":
        raise BarrierTimeoutError(
            f"expansion {record.expansion_id}: {decision.reason} - a producer keeps the old "
            "partition count: refresh its metadata (metadata.max.age.ms / "
            "topic.metadata.refresh.interval.ms) or raise the barrier timeout, then rerun"
        )
    held = check.evidence.before_snapshot.records
    left = grace_ends - time.time()
    message = (
        f"waiting for producers to refresh metadata after expansion {record.expansion_id}: "
        f"{left:.0f} s of grace left"
        if left > 0
        else f"expansion {record.expansion_id}: {decision.reason}"
    )
    counted = f"counted by {check.counted_by}"
    phase = "the producer refresh grace" if left > 0 else "stale placements to stop arriving"
    return Poll(
        False,
        f"{message} ({held} stale placements so far, {counted})"
        if held
        else f"{message} ({counted})",
        sleep_s=decision.wait_s or None,
        detail={"stale_before_snapshot": held, "counted_by": check.counted_by},
        waiting_for=f"{phase} of expansion {record.expansion_id} ({held} stale placements, "
        f"{counted})",
    )


__all__ = ["OrderPoll", "job_count", "order_poll", "order_wait"]
