"""Every wait of the expansion, each written once as a poll function (one look, no sleeping):
the Airflow triggers loop over them, poke mode calls them once per poke, a CLI could do either.

A poll returns `Poll`: ``done`` with the step's ``result``, or not done with the progress line
an operator reads (what it waits for and why). Transient faults (`KafkaUnavailableError`)
propagate; `Reconnect` is the one policy for them.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_samza_expand.core.clock import now_iso, parse_iso
from airflow_samza_expand.core.errors import BarrierTimeoutError, ExpansionError, UnknownTopicError
from airflow_samza_expand.core.lease import Lease
from airflow_samza_expand.core.liveness import (
    acknowledging,
    blocking_stop,
    dead_processors,
    statuses,
)
from airflow_samza_expand.core.order import DEFAULT_STALE_QUIET_S
from airflow_samza_expand.core.record import ExpansionRecord, ExpansionStatus
from airflow_samza_expand.kafka.admin import KafkaAdmin
from airflow_samza_expand.kafka.barrier import barrier_status, barrier_to_dict, snapshot_barrier
from airflow_samza_expand.protocol import order, progress, records
from airflow_samza_expand.store import CoordinatorStore

DEFAULT_PRODUCER_REFRESH_GRACE_S = 300.0
RECONNECT_AFTER = 3
ACTIVE_STATES = frozenset({"starting", "running", "stopping"})


@dataclass(frozen=True)
class Poll:
    """One look at a wait."""

    done: bool
    message: str
    result: dict[str, Any] | None = None
    sleep_s: float | None = None  # wake up earlier than the poll interval (end of a grace)
    detail: Mapping[str, Any] = field(default_factory=dict)


class Reconnect:
    """After `after` transient failures in a row, the caller replaces its clients (a client
    whose connection broke may keep timing out; a new one reconnects)."""

    def __init__(self, after: int = RECONNECT_AFTER) -> None:
        self.after = after
        self.failures = 0

    def failed(self) -> bool:
        """Count one failure; True when the clients should be reopened now."""
        self.failures += 1
        return self.failures % self.after == 0

    def ok(self) -> None:
        self.failures = 0


def describe_lag(lag: Mapping[str, Mapping[int, int]]) -> str:
    """``orders[0]=12 orders[1]=0`` - the per-partition lag for a log line."""
    return " ".join(f"{t}[{p}]={n}" for t, ps in sorted(lag.items()) for p, n in sorted(ps.items()))


# -- ordering barrier --------------------------------------------------------------------------


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
    start = _grace_start(record)
    if start is None:
        stamp = now_iso()

        def change(current: ExpansionRecord) -> ExpansionRecord | None:
            if _grace_start(current) is not None:
                return None
            return current.with_result("grace", {"started_at": stamp})

        start = _grace_start(records.update(store, expansion_id, change, fence=lease)) or stamp
    return parse_iso(start).timestamp() + float(grace_s)


def _grace_start(record: ExpansionRecord) -> str | None:
    expand = record.steps.get("expand")
    if expand is not None and expand.ended_at:
        return expand.ended_at
    return (record.results.get("grace") or {}).get("started_at")


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
    """Grace and a quiet window without stale placements (rule 1.5, `protocol.order`), then
    the barrier snapshot (stored once; a rerun or a concurrent poll reuses the first one).
    Done with ``{expansion_id, barrier_offsets, total_lag, stale_before_snapshot}``.

    ``stale_quiet_s`` defaults to ``min(DEFAULT_STALE_QUIET_S, grace)``; past ``deadline``
    (epoch s; None: the caller's own timeout) while stale placements keep arriving:
    BarrierTimeoutError.
    """
    record = records.require(store, expansion_id)
    if not record.barrier:
        record = progress.begin_barrier(store, expansion_id, grace_ends, fence=lease, record=record)
        waiting = _order_wait(
            admin, store, record, grace_ends, lease=lease, quiet_s=stale_quiet_s,
            deadline=deadline,
        )  # fmt: skip
        if waiting is not None:
            return waiting
        barrier = snapshot_barrier(admin, order.old_counts(record))  # the grown streams only
        lag = barrier_status(admin, group, barrier).total_lag

        def snap(current: ExpansionRecord) -> ExpansionRecord | None:
            if current.barrier:
                return None  # a concurrent poll took it first: keep that one
            out = records.mark(
                current,
                "barrier_snapshot",
                ExpansionStatus.BARRIER_SNAPSHOT,
                result={"group": group, "lag_at_snapshot": int(lag)},
            )
            return dataclasses.replace(out, barrier={t: dict(ps) for t, ps in barrier.items()})

        record = records.update(store, expansion_id, snap, fence=lease)
    barrier = {t: dict(ps) for t, ps in (record.barrier or {}).items()}
    lag = int((record.results.get("barrier_snapshot") or {}).get("lag_at_snapshot", 0))
    offsets = barrier_to_dict(barrier)
    held = order.stale_counts(record)["stale_before_snapshot"]
    return Poll(
        True,
        f"barrier snapshot of {expansion_id}: {offsets} (lag {lag}; {held} stale placements "
        "before it, held)",
        {
            "expansion_id": expansion_id,
            "barrier_offsets": offsets,
            "total_lag": lag,
            "stale_before_snapshot": held,
        },
        detail={"record": record},
    )


def _order_wait(
    admin: KafkaAdmin,
    store: CoordinatorStore,
    record: ExpansionRecord,
    grace_ends: float,
    *,
    lease: Lease | None,
    quiet_s: float | None,
    deadline: float | None,
) -> Poll | None:
    """The pre-snapshot look of rule 1.5: None when the barrier may snapshot now."""
    started = _grace_start(record)
    expanded_at = parse_iso(started).timestamp() if started else grace_ends
    if quiet_s is None:
        quiet_s = min(DEFAULT_STALE_QUIET_S, max(grace_ends - expanded_at, 0.0))
    check = order.order_poll(
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
    """Grace -> snapshot (`snapshot_poll`) -> committed offsets >= snapshot."""
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
    if not status.holds:
        return Poll(
            False,
            f"waiting for group {group} to commit past barrier {expansion_id}: total lag "
            f"{status.total_lag} ({describe_lag(status.lag)})",
            detail={"lag": describe_lag(status.lag), "total_lag": status.total_lag},
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
    snapped = record.steps.get("barrier_snapshot")
    passed = record.steps.get("barrier")
    snapshot_at = snapped.ended_at if snapped else None
    passed_at = passed.ended_at if passed else now_iso()
    waited = (
        parse_iso(passed_at).timestamp() - parse_iso(snapshot_at).timestamp()
        if snapshot_at
        else 0.0
    )
    result = {
        "expansion_id": expansion_id,
        "group": group,
        "barrier_offsets": barrier_to_dict(barrier),
        "snapshot_at": snapshot_at,
        "passed_at": passed_at,
        "seconds_waited": round(max(waited, 0.0), 3),
        "lag_drained": int(
            (record.results.get("barrier_snapshot") or {}).get("lag_at_snapshot", 0)
        ),
    }
    return Poll(True, f"ordering barrier of {expansion_id} holds", result=result)


# -- job processors: stop and acknowledgement ----------------------------------------------------


def active_processors(store: CoordinatorStore, version: int | None) -> dict[str, Mapping[str, Any]]:
    """Live processors of job model `version` that have not stopped; a dead one (silent past
    its TTL, rule 1.7) is never waited for."""
    processors = store.processors()
    return {pid: processors[pid] for pid in blocking_stop(processors, version)}


def reap_dead(store: CoordinatorStore) -> list[str]:
    """Tombstone the records of dead processors; their descriptions, for the log."""
    dead = dead_processors(store.processors())
    for pid in sorted(dead):
        store.remove_processor(pid)
    return [dead[pid].describe() for pid in sorted(dead)]


def describe_processors(processors: Mapping[str, Mapping[str, Any]]) -> str:
    return (
        ", ".join(
            f"{pid} ({p.get('state')}, heartbeat {p.get('heartbeat_at')})"
            for pid, p in sorted(processors.items())
        )
        or "none"
    )


def stop_poll(store: CoordinatorStore, version: int | None) -> Poll:
    """Done once no live processor of `version` is starting, running or stopping; dead ones
    (silent past their TTL) are not waited for and their records are removed."""
    dead = reap_dead(store)
    gone = f" (dead, not waited for and removed: {', '.join(dead)})" if dead else ""
    waiting = active_processors(store, version)
    if waiting:
        return Poll(
            False,
            f"waiting for {len(waiting)} processor(s) of job {store.job_name} v{version} to "
            f"stop: {describe_processors(waiting)}{gone}",
        )
    stopped = sorted(
        pid for pid, p in store.processors().items() if p.get("job_model_version") == version
    )
    return Poll(
        True, f"all processors of v{version} stopped: {stopped}{gone}", {"stopped": stopped}
    )


WARM_STATES = frozenset({"standby", "running"})


def standby_poll(store: CoordinatorStore, version: int) -> Poll:
    """Done once a live processor of job model `version` is warm: it heartbeats ``standby``
    (JVM, SparkSession and Python workers up, waiting for the lease) or already ``running``.
    The handover's stop step waits for it, so that the running version stops only when the
    switch is short; a standby still ``starting`` (warming up) is named while it waits."""
    processors = store.processors()
    live = {
        pid: s
        for pid, s in statuses(processors).items()
        if s.job_model_version == version and s.alive()
    }
    warm = sorted(pid for pid, s in live.items() if s.state in WARM_STATES)
    if warm:
        return Poll(True, f"job {store.job_name} v{version} has a warm processor: {warm}",
                    {"warm": warm})  # fmt: skip
    who = describe_processors({p: processors[p] for p in live}) if live else "none heartbeating"
    return Poll(
        False,
        f"waiting for the standby of job {store.job_name} v{version} to warm up (JVM, "
        f"SparkSession, Python workers) before the running version stops: {who}",
    )


def ack_poll(
    store: CoordinatorStore,
    version: int,
    min_processors: int = 1,
    *,
    accept_stopped: bool = False,
    expansion_id: str | None = None,
    lease: Lease | None = None,
) -> Poll:
    """Done once `min_processors` live active processors heartbeat ``running`` job model
    `version` (a dead one never counts, nor a standby; with `accept_stopped`, a clean
    ``stopped`` counts too: a run that ended; a ``failed`` one alone is a refusal). With
    `expansion_id`, the first poll is the start of the expansion's ``ack`` step."""
    if expansion_id:
        records.begin(store, expansion_id, "ack", fence=lease)
    processors = store.processors()
    mine = {p: s for p, s in processors.items() if s.get("job_model_version") == version}
    running = acknowledging(processors, version)
    if accept_stopped:
        running = sorted({*running, *(p for p, s in mine.items() if s.get("state") == "stopped")})
    others = {
        pid: f"{p.get('state')} v{p.get('job_model_version')}"
        for pid, p in sorted(processors.items())
        if pid not in running
    }
    failed = sorted(p for p, s in mine.items() if s.get("state") == "failed")
    if accept_stopped and failed and not running:
        raise ExpansionError(
            f"processors {failed} of job {store.job_name!r} failed on job model v{version} - "
            "read the Spark log of the submit step, fix, clear the task"
        )
    info = {"version": version, "running": running, "others": others}
    if len(running) >= min_processors:
        return Poll(True, f"job {store.job_name} runs job model v{version}: {running}", info)
    return Poll(
        False,
        f"waiting for {min_processors} processor(s) of {store.job_name} to run job model "
        f"v{version}: running {running or 'none'}, others {others or 'none'}",
        detail=info,
    )


# -- partition count -----------------------------------------------------------------------------


def partition_count_or_zero(admin: KafkaAdmin, topic: str) -> int:
    """The topic's partition count; 0 while it does not exist."""
    try:
        return admin.partition_counts([topic])[topic]
    except UnknownTopicError:
        return 0


def partition_count_poll(admin: KafkaAdmin, topic: str, baseline: int | None) -> Poll:
    """Done when the count differs from `baseline`; with no baseline yet, the count becomes it
    (``detail["baseline"]``)."""
    count = partition_count_or_zero(admin, topic)
    if baseline is None:
        return Poll(
            False, f"watching {topic}: baseline {count} partitions", detail={"baseline": count}
        )
    if count != baseline:
        result = {"topic": topic, "baseline": baseline, "partition_count": count}
        return Poll(True, f"topic {topic} went from {baseline} to {count} partitions", result)
    return Poll(
        False, f"waiting for {topic} to leave {count} partitions", detail={"baseline": count}
    )


__all__ = [
    "DEFAULT_PRODUCER_REFRESH_GRACE_S",
    "Poll",
    "Reconnect",
    "ack_poll",
    "active_processors",
    "barrier_poll",
    "snapshot_poll",
    "standby_poll",
    "describe_lag",
    "grace_until",
    "partition_count_or_zero",
    "partition_count_poll",
    "stop_poll",
]
