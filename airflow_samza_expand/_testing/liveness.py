"""A processor record that reads as dead, for tests of liveness."""

from __future__ import annotations

import time
from typing import Any

from airflow_samza_expand.core._liveness import dead_processors

DEAD_TTL_S = 0.001  # a heartbeat is older than this TTL a millisecond after it is written


def heartbeat_dead(
    store: Any,
    processor_id: str,
    version: int,
    state: str = "running",
    *,
    role: str = "active",
    timeout_s: float = 5.0,
) -> None:
    """Heartbeat ``processor_id`` with a 1 ms TTL; return once the store reads it as dead.

    Heartbeat times have millisecond resolution: read back within the same millisecond, the
    record is 0 ms old and still alive, so a test that reads at once must wait for the tick.
    """
    store.heartbeat(processor_id, version, state, role=role, ttl_s=DEAD_TTL_S)
    deadline = time.monotonic() + timeout_s
    while processor_id not in dead_processors(store.processors()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{processor_id}'s 1 ms heartbeat did not age in {timeout_s} s")
