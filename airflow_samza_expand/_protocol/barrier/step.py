"""The barrier step, whole: after the expand step, producers get a refresh
grace to learn the new partition count; the old partitions are scanned for stale placements
(records a producer still put by the old count) until a quiet window has none; then the
barrier snapshot (the old partitions' end offsets) is taken once, and the step waits until the
job's committed offsets reach it (the lag at the snapshot is drained).

* `grace_until` - when the grace ends (the expand step's end, else a stored start, + grace).
* `snapshot_poll` - grace, quiet window (`_protocol.barrier.before_snapshot`: `order_poll` +
  `core._order.decide_snapshot`), snapshot.
* `barrier_poll` - snapshot, then committed offsets >= snapshot: the wait's one implementation
  (the trigger loops over it, the sensor's poke mode calls it once per poke).

Results kept in the record: ``grace`` (`GraceResult`), ``barrier_snapshot``
(`SnapshotResult`); the poll's own result is `BarrierResult`. The pure rules are in
`_protocol.barrier.rule` (decide), `core._stale` (what is stale); the Kafka reads in
`_protocol.barrier.reads` and `_protocol.barrier.stale_scan`; the scan's evidence in the record
in `_protocol.barrier.evidence`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._protocol import records
from airflow_samza_expand._protocol.barrier import evidence, progress
from airflow_samza_expand._protocol.barrier.before_snapshot import OrderPoll, order_poll, order_wait
from airflow_samza_expand._protocol.barrier.reads import (
    barrier_status,
    barrier_to_dict,
    snapshot_barrier,
)
from airflow_samza_expand._protocol.poll import Poll, describe_lag
from airflow_samza_expand._protocol.restart import waits_for_drain
from airflow_samza_expand.core._clock import now_iso, parse_iso
from airflow_samza_expand.core._lease import Lease
from airflow_samza_expand.core._order import SCAN_SOURCE
from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus
from airflow_samza_expand.store import CoordinatorStore

log = logging.getLogger(__name__)

DEFAULT_PRODUCER_REFRESH_GRACE_S = 300.0
DEFAULT_BARRIER_TIMEOUT_S = 3600.0  # after the grace: how long the job may take to drain


# -- typed results -------------------------------------------------------------------------------


@dataclass(frozen=True)
class GraceResult:
    """``results["grace"]``: when the grace started, for an expansion grown outside the expand
    step (otherwise the expand step's end is the start)."""

    started_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"started_at": self.started_at}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any] | None) -> GraceResult:
        return cls((doc or {}).get("started_at"))


@dataclass(frozen=True)
class SnapshotResult:
    """``results["barrier_snapshot"]``: the group whose lag was measured and that lag."""

    group: str = ""
    lag_at_snapshot: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "lag_at_snapshot": int(self.lag_at_snapshot)}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any] | None) -> SnapshotResult:
        doc = doc or {}
        return cls(str(doc.get("group") or ""), int(doc.get("lag_at_snapshot") or 0))

    @classmethod
    def of(cls, record: ExpansionRecord) -> SnapshotResult:
        return cls.from_dict(record.results.get("barrier_snapshot"))


@dataclass(frozen=True)
class BarrierResult:
    """What the barrier poll returns once the barrier holds (the barrier task's XCom)."""

    expansion_id: str
    group: str
    barrier_offsets: dict[str, dict[str, int]]
    snapshot_at: str | None
    passed_at: str | None
    seconds_waited: float
    lag_drained: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> BarrierResult:
        return cls(**{f.name: doc.get(f.name) for f in dataclasses.fields(cls)})  # type: ignore[arg-type]


# -- producer refresh grace ----------------------------------------------------------------------


def grace_until(
    store: CoordinatorStore, expansion_id: str, grace_s: float, *, lease: Lease | None = None
) -> float:
    """Epoch second when the producer refresh grace ends: end of the expand step + grace.

    Expanded outside the expand step: the grace starts now and its start is stored, so a rerun
    does not restart it. A record holding a barrier snapshot has no grace left.
    """
    record = records.require(store, expansion_id)
    if record.barrier:
        return 0.0
    start = grace_start(record)
    if start is None:
        stamp = now_iso()

        def change(current: ExpansionRecord) -> ExpansionRecord | None:
            if grace_start(current) is not None:
                return None
            return current.with_result("grace", GraceResult(stamp).to_dict())

        start = grace_start(records.update(store, expansion_id, change, fence=lease)) or stamp
    return parse_iso(start).timestamp() + float(grace_s)


def grace_start(record: ExpansionRecord) -> str | None:
    """The expand step's end, else the stored grace start (None: no grace has started)."""
    expand = record.steps.get("expand")
    if expand is not None and expand.ended_at:
        return expand.ended_at
    return GraceResult.from_dict(record.results.get("grace")).started_at


# -- snapshot ------------------------------------------------------------------------------------


def snapshot_poll(
    admin: KafkaAdmin,
    store: CoordinatorStore,
    *,
    expansion_id: str,
    group: str,
    grace_ends: float,
    lease: Lease | None = None,
    stale_quiet_s: float | None = None,
    deadline: float | None = None,
) -> Poll:
    """Grace and a quiet window without stale placements (`order_poll`), then the barrier
    snapshot (stored once; a rerun or a concurrent poll reuses the first one).
    Done with ``{expansion_id, barrier_offsets, total_lag, stale_before_snapshot}``.

    ``stale_quiet_s`` defaults to ``min(DEFAULT_STALE_QUIET_S, grace)``; past ``deadline``
    (epoch s; None: the caller's own timeout) while stale placements keep arriving:
    BarrierTimeoutError.
    """
    record = records.require(store, expansion_id)
    if not record.barrier:
        record = progress.begin_barrier(store, expansion_id, grace_ends, fence=lease, record=record)
        started = grace_start(record)
        waiting = order_wait(
            admin, store, record, parse_iso(started).timestamp() if started else grace_ends,
            grace_ends, lease=lease, stale_quiet_s=stale_quiet_s, deadline=deadline,
        )  # fmt: skip
        if waiting is not None:
            return waiting
        record = _take_snapshot(admin, store, record, group, lease)
    barrier = {t: dict(ps) for t, ps in (record.barrier or {}).items()}
    lag = SnapshotResult.of(record).lag_at_snapshot
    offsets = barrier_to_dict(barrier)
    held = evidence.stale_counts(record)["stale_before_snapshot"]
    return Poll(
        True,
        f"barrier snapshot of {expansion_id}: {offsets} (lag {lag}; {held} stale placements "
        f"before it, held; counted by {evidence.evidence_of(record).counted_by or SCAN_SOURCE}, "
        "those after it by the job's batches)",
        {
            "expansion_id": expansion_id,
            "barrier_offsets": offsets,
            "total_lag": lag,
            "stale_before_snapshot": held,
        },
        detail={"record": record},
    )


def _take_snapshot(
    admin: KafkaAdmin,
    store: CoordinatorStore,
    record: ExpansionRecord,
    group: str,
    lease: Lease | None,
) -> ExpansionRecord:
    """Snapshot the grown streams' old partitions and the group's lag; the first one stored
    wins."""
    barrier = snapshot_barrier(admin, evidence.old_counts(record))  # the grown streams only
    lag = barrier_status(admin, group, barrier).total_lag

    def snap(current: ExpansionRecord) -> ExpansionRecord | None:
        if current.barrier:
            return None  # a concurrent poll took it first: keep that one
        out = records.mark(
            current,
            "barrier_snapshot",
            ExpansionStatus.BARRIER_SNAPSHOT,
            result=SnapshotResult(group, int(lag)).to_dict(),
        )
        return dataclasses.replace(out, barrier={t: dict(ps) for t, ps in barrier.items()})

    return records.update(store, record.expansion_id, snap, fence=lease)


# -- the barrier ---------------------------------------------------------------------------------


def barrier_poll(
    admin: KafkaAdmin,
    store: CoordinatorStore,
    *,
    expansion_id: str,
    group: str,
    grace_ends: float,
    lease: Lease | None = None,
    stale_quiet_s: float | None = None,
    deadline: float | None = None,
) -> Poll:
    """Grace -> snapshot (`snapshot_poll`) -> committed offsets >= snapshot; done with
    `BarrierResult` as a dict."""
    snapshot = snapshot_poll(
        admin, store, expansion_id=expansion_id, group=group, grace_ends=grace_ends, lease=lease,
        stale_quiet_s=stale_quiet_s, deadline=deadline,
    )  # fmt: skip
    if not snapshot.done:
        return snapshot
    record: ExpansionRecord = snapshot.detail["record"]
    record = records.begin(store, expansion_id, "barrier", fence=lease, record=record)
    barrier = {t: dict(ps) for t, ps in (record.barrier or {}).items()}
    status = barrier_status(admin, group, barrier)
    progress.note_lag(store, expansion_id, status.lag, fence=lease)  # the UI's lag trend
    # in place the job itself reads a child only once it passed its parent's H
    if not status.holds and waits_for_drain(record):
        return Poll(
            False,
            f"waiting for group {group} to commit past barrier {expansion_id}: total lag "
            f"{status.total_lag} ({describe_lag(status.lag)})",
            detail={"lag": describe_lag(status.lag), "total_lag": status.total_lag},
            waiting_for=f"group {group} to commit past barrier {expansion_id} on "
            + ", ".join(
                f"{t}[{p}]"
                for t, ps in sorted(status.lag.items())
                for p, n in sorted(ps.items())
                if n > 0
            ),
        )
    if not records.reached(record, ExpansionStatus.BARRIER_PASSED):
        record = records.update(
            store,
            expansion_id,
            lambda r: (
                None
                if records.reached(r, ExpansionStatus.BARRIER_PASSED)
                else records.mark(r, "barrier", ExpansionStatus.BARRIER_PASSED)
            ),
            fence=lease,
        )
    result = _passed(record, group, barrier)
    return Poll(True, f"ordering barrier of {expansion_id} holds", result=result.to_dict())


def _passed(
    record: ExpansionRecord, group: str, barrier: Mapping[str, Mapping[int, int]]
) -> BarrierResult:
    snapped = record.steps.get("barrier_snapshot")
    passed = record.steps.get("barrier")
    snapshot_at = snapped.ended_at if snapped else None
    passed_at = passed.ended_at if passed else now_iso()
    waited = (
        parse_iso(passed_at).timestamp() - parse_iso(snapshot_at).timestamp()
        if snapshot_at
        else 0.0
    )
    return BarrierResult(
        expansion_id=record.expansion_id,
        group=group,
        barrier_offsets=barrier_to_dict(barrier),
        snapshot_at=snapshot_at,
        passed_at=passed_at,
        seconds_waited=round(max(waited, 0.0), 3),
        lag_drained=SnapshotResult.of(record).lag_at_snapshot,
    )


__all__ = [
    "DEFAULT_PRODUCER_REFRESH_GRACE_S",
    "BarrierResult",
    "GraceResult",
    "OrderPoll",
    "SnapshotResult",
    "barrier_poll",
    "grace_start",
    "grace_until",
    "order_poll",
    "snapshot_poll",
]
