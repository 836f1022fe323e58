"""The job page's parts built from what `data` read (pure: no store, no Kafka): processor
rows, lease rows, the expansion ids behind the job model history, the job log's tail."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from airflow_samza_expand._protocol.job.launch import on_this_host, this_host
from airflow_samza_expand.airflow._ui.decode import age_s
from airflow_samza_expand.airflow._ui.records import JobSnapshot, LeaseInfo, LogTail, Processor
from airflow_samza_expand.airflow._ui.settings import UiSettings
from airflow_samza_expand.core._lease import Lease
from airflow_samza_expand.core._render import natural_key
from airflow_samza_expand.core.model import JobModel

DEAD_STATES = frozenset({"stopped", "failed"})
LOG_TAIL_CHARS = 4000


def processor_rows(raw: Mapping[str, Mapping[str, Any]], settings: UiSettings) -> list[Processor]:
    now = datetime.now(UTC)
    rows = []
    for pid, record in raw.items():
        age = age_s(record.get("heartbeat_at"), now)
        ttl = float(record.get("ttl") or record.get("ttl_s") or settings.processor_ttl_s)
        state = str(record.get("state", "unknown"))
        version = record.get("job_model_version")
        rows.append(
            Processor(
                processor_id=pid,
                state=state,
                job_model_version=int(version) if isinstance(version, int) else None,
                role=record.get("role"),
                heartbeat_at=record.get("heartbeat_at"),
                heartbeat_age_s=age,
                alive=age is not None and age <= ttl and state not in DEAD_STATES,
                uncovered=dict(record.get("uncovered") or {}),
                stale_placements=record.get("stale_placements") or None,
                consumer_group=record.get("consumer_group") or None,
            )
        )
    # the live ones first, the newest job model first, then by id in natural order
    return sorted(
        rows,
        key=lambda p: (not p.alive, -(p.job_model_version or 0), natural_key(p.processor_id)),
    )


def lease_rows(leases: Sequence[Lease]) -> list[LeaseInfo]:
    now = datetime.now(UTC)
    rows = []
    for lease in leases:
        expires_in = round((lease.expires_at() - now).total_seconds(), 1)
        rows.append(
            LeaseInfo(
                name=lease.name,
                holder=lease.holder,
                epoch=lease.epoch,
                renewed_at=lease.renewed_at,
                expires_in_s=None if lease.released else expires_in,
                expired=not lease.released and bool(lease.expired(now)),
                released=bool(lease.released),
                expires_at=None if lease.released else lease.expires_at().isoformat(),
            )
        )
    return rows


def expansion_ids(job: str, history: Sequence[JobModel], live: Mapping[str, int]) -> list[str]:
    """Ids of the expansions behind each job model version, and of one in flight (the topic
    grew past the newest model), newest first: today's store lists no expansions itself."""
    from airflow_samza_expand._protocol.records import expansion_id_for

    def grown(before: Mapping[str, int], after: Mapping[str, int]) -> str | None:
        streams = sorted(s for s in after if after[s] != before.get(s))
        if not streams:
            return None
        return expansion_id_for(
            job, {s: before.get(s, 0) for s in streams}, {s: after[s] for s in streams}
        )

    counts = [m.partition_counts() for m in history]
    ids = [grown(a, b) for a, b in zip(counts, counts[1:], strict=False)]
    if counts and live:
        ids.append(grown(counts[-1], {s: n for s, n in live.items() if s in counts[-1]}))
    return [i for i in reversed(ids) if i]


def elsewhere(handle: Mapping[str, Any], snapshot: JobSnapshot) -> str:
    """Where a launch's log is when this host cannot read it, and what any host can read about
    the launch: the record's launch facts and the heartbeats of the processors of its version."""
    host = handle.get("host") or "the host that launched it"
    facts = ", ".join(
        f"{name} {handle[key]}"
        for key, name in (("launch_id", "launch"), ("attempt", "attempt"),
                          ("launched_at", "at"), ("application", "application"))
        if handle.get(key) is not None
    )  # fmt: skip
    version = next((e.new_version for e in snapshot.expansions if e.launches), None)
    beats = "; ".join(
        f"processor {p.processor_id} {p.state}, heartbeat {p.heartbeat_at}"
        + ("" if p.alive else " (silent past its TTL)")
        for p in snapshot.processors
        if p.job_model_version == version
    )
    return (
        f"the log is on {host} at this path (this page runs on {this_host()}; read it there)"
        + (f" - {facts}" if facts else "")
        + f"; processors of v{version}: {beats or 'none has heartbeated yet'}"
    )


def log_tail(snapshot: JobSnapshot, settings: UiSettings) -> LogTail | None:
    """Tail of the log the newest detached launch wrote, if it is under an allowed directory
    on this host; else where it is (`elsewhere`)."""
    from airflow_samza_expand._protocol.job.launch import tail

    path = next((e.log_path for e in snapshot.expansions if e.log_path), None)
    if not path:
        return None
    handle = next(
        (h for e in snapshot.expansions for h in e.launches if h.get("log_path") == path), {}
    )
    if not on_this_host(handle):
        return LogTail(path, "", elsewhere(handle, snapshot))
    real = os.path.realpath(path)
    allowed = [os.path.realpath(d) for d in settings.log_dirs]
    if not real.endswith(".log") or not any(
        real.startswith(d.rstrip(os.sep) + os.sep) for d in allowed
    ):
        return LogTail(
            path,
            "",
            "not shown: the path is outside [samza_expand] ui_log_dirs "
            f"({', '.join(settings.log_dirs)}) - add its directory there to show it",
        )
    if not os.path.exists(real):
        return LogTail(path, "", elsewhere(handle, snapshot))
    text = tail(real, LOG_TAIL_CHARS)
    if os.path.getsize(real) > LOG_TAIL_CHARS and "\n" in text:
        text = text.split("\n", 1)[1]  # the tail starts at a whole line
    return LogTail(path, text)


__all__ = ["expansion_ids", "lease_rows", "log_tail", "processor_rows"]
