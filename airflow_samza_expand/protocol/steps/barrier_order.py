"""The barrier's look before its snapshot (DESIGN rule 1.5): stale placements in the old
partitions since the growth, and whether the barrier may snapshot now.

* `order_poll` - one look: the counts (`protocol.order.scan_before_snapshot`) and the decision
  (`core.order.decide_snapshot`: wait, snapshot or timeout).
* `order_wait` - the barrier step's use of it (`protocol.steps.barrier.snapshot_poll`): None
  when it may snapshot, a waiting `Poll` otherwise, `BarrierTimeoutError` past its deadline.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from airflow_samza_expand.core.clock import parse_iso, to_iso
from airflow_samza_expand.core.errors import BarrierTimeoutError
from airflow_samza_expand.core.lease import Lease
from airflow_samza_expand.core.order import (
    DEFAULT_STALE_QUIET_S,
    BarrierDecision,
    OrderEvidence,
    decide_snapshot,
)
from airflow_samza_expand.core.record import ExpansionRecord
from airflow_samza_expand.core.stale import StalePlacement
from airflow_samza_expand.kafka.admin import KafkaAdmin
from airflow_samza_expand.kafka.stale_scan import StaleScanner
from airflow_samza_expand.protocol import order
from airflow_samza_expand.protocol.poll import Poll
from airflow_samza_expand.store import CoordinatorStore


@dataclass(frozen=True)
class OrderPoll:
    """One look before the snapshot: the decision and what the scan found this time."""

    decision: BarrierDecision
    evidence: OrderEvidence
    found: tuple[StalePlacement, ...]
    records_read: int


def order_poll(
    admin: KafkaAdmin,
    store: CoordinatorStore,
    kafka_config: Mapping[str, str],
    *,
    expansion_id: str,
    expanded_at: float,
    grace_ends: float,
    deadline: float | None,
    quiet_s: float = DEFAULT_STALE_QUIET_S,
    lease: Lease | None = None,
    scanner: StaleScanner | None = None,
    now: float | None = None,
) -> OrderPoll:
    """Scan (bounded) what was appended to the old partitions since the last poll and store
    the counts (`order.scan_before_snapshot`), then decide whether the barrier may snapshot
    (`core.order.decide_snapshot`: wait, snapshot or timeout). Only while there is no
    snapshot."""
    now = datetime.now(UTC).timestamp() if now is None else now
    stamp = to_iso(datetime.fromtimestamp(now, UTC))
    stored, result = order.scan_before_snapshot(
        admin, store, kafka_config, expansion_id, stamp, lease=lease, scanner=scanner
    )
    last = stored.last_stale_at
    decision = decide_snapshot(
        now=now,
        expanded_at=expanded_at,
        grace_ends=grace_ends,
        deadline=deadline,
        quiet_s=quiet_s,
        last_stale_at=parse_iso(last).timestamp() if last else None,
        stale_records=stored.before_snapshot.records,
        caught_up=result.caught_up,
        backlog=result.backlog(),
    )
    return OrderPoll(decision, stored, result.placements, result.records_read)


def order_wait(
    admin: KafkaAdmin,
    store: CoordinatorStore,
    record: ExpansionRecord,
    expanded_at: float,
    grace_ends: float,
    *,
    lease: Lease | None,
    quiet_s: float | None,
    deadline: float | None,
) -> Poll | None:
    """The pre-snapshot look of rule 1.5: None when the barrier may snapshot now (the step's
    `snapshot_poll` then takes the snapshot); else the `Poll` to wait with.
    ``expanded_at``: when the grace started (epoch s)."""
    if quiet_s is None:
        quiet_s = min(DEFAULT_STALE_QUIET_S, max(grace_ends - expanded_at, 0.0))
    check = order_poll(
        admin, store, admin.config, expansion_id=record.expansion_id, expanded_at=expanded_at,
        grace_ends=grace_ends, deadline=deadline, quiet_s=quiet_s, lease=lease,
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
    return Poll(
        False,
        f"{message} ({held} stale placements so far)" if held else message,
        sleep_s=decision.wait_s or None,
        detail={"stale_before_snapshot": held},
    )


__all__ = ["OrderPoll", "order_poll", "order_wait"]
