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

from airflow_samza_expand.core.clock import age_s, now_iso, parse_iso
from airflow_samza_expand.core.errors import ExpansionError, UnknownTopicError
from airflow_samza_expand.core.lease import Lease
from airflow_samza_expand.core.record import ExpansionRecord, ExpansionStatus
from airflow_samza_expand.kafka.admin import KafkaAdmin
from airflow_samza_expand.kafka.barrier import barrier_status, barrier_to_dict, snapshot_barrier
from airflow_samza_expand.protocol import records
from airflow_samza_expand.store import CoordinatorStore

DEFAULT_PRODUCER_REFRESH_GRACE_S = 300.0
RECONNECT_AFTER = 3
FRESH_HEARTBEAT_S = 60.0  # the job heartbeats at least every 10 s while it runs
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
) -> Poll:
    """Grace, then the barrier snapshot (stored once; a rerun or a concurrent poll reuses the
    first one). Done with ``{expansion_id, barrier_offsets, total_lag}``."""
    record = records.require(store, expansion_id)
    if not record.barrier:
        left = grace_ends - time.time()
        if left > 0:
            return Poll(
                False,
                f"waiting for producers to refresh metadata after expansion {expansion_id}: "
                f"{left:.0f} s of grace left",
                sleep_s=left,
            )
        old_counts = {t: int(n) for t, n in record.plan["counts_before"].items()}
        barrier = snapshot_barrier(admin, old_counts)
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
    return Poll(
        True,
        f"barrier snapshot of {expansion_id}: {offsets} (lag {lag})",
        {"expansion_id": expansion_id, "barrier_offsets": offsets, "total_lag": lag},
        detail={"record": record},
    )


def barrier_poll(
    admin: KafkaAdmin,
    store: CoordinatorStore,
    *,
    expansion_id: str,
    group: str,
    grace_ends: float,
    lease: Lease | None = None,
) -> Poll:
    """Grace -> snapshot (`snapshot_poll`) -> committed offsets >= snapshot."""
    snapshot = snapshot_poll(
        admin, store, expansion_id=expansion_id, group=group, grace_ends=grace_ends, lease=lease
    )
    if not snapshot.done:
        return snapshot
    record: ExpansionRecord = snapshot.detail["record"]
    barrier = {t: dict(ps) for t, ps in (record.barrier or {}).items()}
    status = barrier_status(admin, group, barrier)
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


def fresh(heartbeat_at: Any) -> bool:
    """True for a heartbeat newer than FRESH_HEARTBEAT_S (a killed job leaves a stale one)."""
    try:
        return bool(heartbeat_at) and age_s(str(heartbeat_at)) < FRESH_HEARTBEAT_S
    except ValueError:
        return False


def active_processors(store: CoordinatorStore, version: int | None) -> dict[str, Mapping[str, Any]]:
    """Processors of job model `version` that have not stopped."""
    return {
        pid: p
        for pid, p in store.processors().items()
        if p.get("job_model_version") == version and p.get("state") in ACTIVE_STATES
    }


def describe_processors(processors: Mapping[str, Mapping[str, Any]]) -> str:
    return (
        ", ".join(
            f"{pid} ({p.get('state')}, heartbeat {p.get('heartbeat_at')})"
            for pid, p in sorted(processors.items())
        )
        or "none"
    )


def stop_poll(store: CoordinatorStore, version: int | None) -> Poll:
    """Done once no processor of `version` is starting, running or stopping."""
    waiting = active_processors(store, version)
    if waiting:
        return Poll(
            False,
            f"waiting for {len(waiting)} processor(s) of job {store.job_name} v{version} to "
            f"stop: {describe_processors(waiting)}",
        )
    stopped = sorted(
        pid for pid, p in store.processors().items() if p.get("job_model_version") == version
    )
    return Poll(True, f"all processors of v{version} stopped: {stopped}", {"stopped": stopped})


def ack_poll(
    store: CoordinatorStore, version: int, min_processors: int = 1, *, accept_stopped: bool = False
) -> Poll:
    """Done once `min_processors` processors heartbeat ``running`` job model `version` (with
    `accept_stopped`, a clean ``stopped`` counts too: a run that ended; a ``failed`` one alone
    is a refusal)."""
    processors = store.processors()
    mine = {p: s for p, s in processors.items() if s.get("job_model_version") == version}
    ok = {"running", "stopped"} if accept_stopped else {"running"}
    running = sorted(p for p, s in mine.items() if s.get("state") in ok)
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
    "describe_lag",
    "fresh",
    "grace_until",
    "partition_count_or_zero",
    "partition_count_poll",
    "stop_poll",
]
