"""One step of each wait (barrier, acknowledgement, partition count), shared by sensors in poke
mode and by triggers (which call these blocking functions through ``asyncio.to_thread``)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_samza_expand.airflow.operators._common import (
    parse_iso,
    update_expansion,
    utc_now_iso,
)
from airflow_samza_expand.core.errors import ExpansionError, UnknownTopicError

DEFAULT_PRODUCER_REFRESH_GRACE_S = 300.0


# -- ordering barrier --------------------------------------------------------------------------


@dataclass
class BarrierProgress:
    """Where the barrier wait stands after one poll."""

    phase: str  # "grace" | "waiting" | "holds"
    grace_left_s: float = 0.0
    barrier: dict[str, dict[int, int]] = field(default_factory=dict)
    lag: dict[str, dict[int, int]] = field(default_factory=dict)
    total_lag: int = 0
    result: dict[str, Any] | None = None


def _encode_barrier(barrier: Mapping[str, Mapping[int, int]]) -> dict[str, dict[str, int]]:
    return {t: {str(p): int(o) for p, o in sorted(ps.items())} for t, ps in sorted(barrier.items())}


def _decode_barrier(doc: Mapping[str, Mapping[str, int]]) -> dict[str, dict[int, int]]:
    return {t: {int(p): int(o) for p, o in ps.items()} for t, ps in doc.items()}


def _expansion(store: Any, expansion_id: str, job_name: str) -> dict[str, Any]:
    record = store.get_expansion(expansion_id)
    if record is None:
        raise ExpansionError(
            f"no expansion record {expansion_id!r} for job {job_name!r} in its coordinator store "
            "- run PlanExpansionOperator first and pass its expansion_id"
        )
    return dict(record)


def barrier_grace_until(store: Any, expansion_id: str, job_name: str, grace_s: float) -> float:
    """Epoch second when the producer refresh grace ends: ``expanded_at`` + grace.

    Without ``expanded_at`` (expanded outside ExpandPartitionsOperator) the grace starts now and
    ``grace_started_at`` is stored, so a rerun does not restart it. A record holding a barrier
    snapshot has no grace left.
    """
    record = _expansion(store, expansion_id, job_name)
    if record.get("barrier"):
        return 0.0
    start = record.get("expanded_at") or record.get("grace_started_at")
    if not start:
        start = utc_now_iso()
        update_expansion(store, expansion_id, grace_started_at=start)
    return parse_iso(start).timestamp() + float(grace_s)


def barrier_poll(
    admin: Any,
    store: Any,
    *,
    expansion_id: str,
    job_name: str,
    group: str,
    grace_until: float,
) -> BarrierProgress:
    """One barrier poll: grace -> snapshot (stored once, reused by reruns) -> committed offsets.

    Requests per poll after the snapshot: one ListOffsets-free consumer-group offset fetch via
    ``barrier_status`` plus one expansion record read; constant however long the wait.
    """
    from airflow_samza_expand.kafka.barrier import barrier_status, snapshot_barrier

    now = time.time()
    record = _expansion(store, expansion_id, job_name)
    if not record.get("barrier"):
        if now < grace_until:
            return BarrierProgress(phase="grace", grace_left_s=grace_until - now)
        old_counts = {t: int(n) for t, n in record["counts_before"].items()}
        barrier = snapshot_barrier(admin, old_counts)
        status = barrier_status(admin, group, barrier)
        record = update_expansion(
            store,
            expansion_id,
            barrier=_encode_barrier(barrier),
            barrier_snapshot_at=utc_now_iso(),
            barrier_group=group,
            lag_at_snapshot=int(status.total_lag),
            status="barrier-snapshot",
        )
    barrier = _decode_barrier(record["barrier"])
    status = barrier_status(admin, group, barrier)
    progress = BarrierProgress(
        phase="holds" if status.holds else "waiting",
        barrier=barrier,
        lag={t: dict(ps) for t, ps in status.lag.items()},
        total_lag=int(status.total_lag),
    )
    if status.holds:
        passed_at = record.get("barrier_passed_at") or utc_now_iso()
        if not record.get("barrier_passed_at"):
            update_expansion(
                store, expansion_id, barrier_passed_at=passed_at, status="barrier-passed"
            )
        waited = (
            parse_iso(passed_at).timestamp() - parse_iso(record["barrier_snapshot_at"]).timestamp()
        )
        progress.result = {
            "expansion_id": expansion_id,
            "group": group,
            "barrier_offsets": _encode_barrier(barrier),
            "snapshot_at": record["barrier_snapshot_at"],
            "passed_at": passed_at,
            "seconds_waited": round(max(waited, 0.0), 3),
            "lag_drained": int(record.get("lag_at_snapshot", 0)),
        }
    return progress


def describe_lag(lag: Mapping[str, Mapping[int, int]]) -> str:
    """``orders[0]=12 orders[1]=0`` - the per-partition lag for a log line."""
    return " ".join(f"{t}[{p}]={n}" for t, ps in sorted(lag.items()) for p, n in sorted(ps.items()))


# -- job model acknowledgement -----------------------------------------------------------------


def ack_poll(store: Any, version: int, min_processors: int) -> tuple[bool, dict[str, Any]]:
    """Whether ``min_processors`` processors heartbeat ``running`` job model ``version``."""
    processors = store.processors()
    running = sorted(
        pid
        for pid, p in processors.items()
        if p.get("job_model_version") == version and p.get("state") == "running"
    )
    others = {
        pid: f"{p.get('state')} v{p.get('job_model_version')}"
        for pid, p in sorted(processors.items())
        if pid not in running
    }
    info = {"version": version, "running": running, "others": others}
    return len(running) >= min_processors, info


# -- partition count -----------------------------------------------------------------------------


def partition_count_or_zero(admin: Any, topic: str) -> int:
    """The topic's partition count; 0 while it does not exist."""
    try:
        return admin.partition_counts([topic])[topic]
    except UnknownTopicError:
        return 0
