"""The job's processors as the stop, standby and acknowledgement steps see them: who blocks a
stop, who is dead (never waited for), and one line naming them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_samza_expand.core._liveness import blocking_stop, dead_processors
from airflow_samza_expand.store import CoordinatorStore


def active_processors(store: CoordinatorStore, version: int | None) -> dict[str, Mapping[str, Any]]:
    """Live processors of job model `version` that have not stopped; a dead one (silent past
    its TTL) is never waited for."""
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


__all__ = ["active_processors", "describe_processors", "reap_dead"]
