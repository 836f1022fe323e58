"""Watching a scenario's job from outside during an expansion: downtime and drain time."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from airflow_samza_expand._demo.jobs import committed_total

if TYPE_CHECKING:
    from airflow_samza_expand.store import CoordinatorStore


class Probe(threading.Thread):
    """Watches the job from outside at 0.1 s resolution during an expansion: when the old job
    stopped, when the restarted job committed its first batch (downtime), and when the group
    reached the barrier snapshot (drain time)."""

    def __init__(self, config: dict[str, Any], job_name: str, topic: str, expansion_id: str):
        super().__init__(name="expansion-probe", daemon=True)
        from airflow_samza_expand._kafka.admin import KafkaAdmin
        from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

        self.admin = KafkaAdmin(config, timeout_s=15)
        self.store = KafkaCoordinatorStore(config, job_name)
        self.job_name, self.topic, self.expansion_id = job_name, topic, expansion_id
        self.halt = threading.Event()
        self.stopped_at: float | None = None
        self.first_commit_at: float | None = None
        self.barrier_reached_at: float | None = None

    def run(self) -> None:
        baseline = None
        while not self.halt.is_set():
            try:
                self._tick(baseline)
                if self.stopped_at is not None and baseline is None:
                    baseline = committed_total(self.admin, self.job_name, self.topic)
                    self._tick(baseline)
            except Exception:  # noqa: BLE001 - a probe hiccup must not end the scenario
                pass
            self.halt.wait(0.1)

    def _tick(self, baseline: int | None) -> None:
        now = time.time()
        if self.barrier_reached_at is None:
            record = self.store.get_expansion(self.expansion_id)
            barrier = record.barrier if record is not None else None
            if barrier:
                topic_barrier = barrier.get(self.topic, {})
                parts = [int(p) for p in topic_barrier]
                done = self.admin.group_offsets(self.job_name, {self.topic: parts})[self.topic]
                if all((done.get(int(p)) or 0) >= o for p, o in topic_barrier.items()):
                    self.barrier_reached_at = now
        if self.stopped_at is None:
            states = [p.get("state") for p in self.store.processors().values()]
            if states and "stopped" in states and "running" not in states:
                self.stopped_at = now
        elif (
            baseline is not None
            and self.first_commit_at is None
            and committed_total(self.admin, self.job_name, self.topic) > baseline
        ):
            self.first_commit_at = now

    def close(self) -> None:
        self.halt.set()
        self.join(10)
        self.admin.close()
        self.store.close()


def seconds_between(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(b - a, 3)


def drain_s(
    summary: dict, reached: float | None, store: CoordinatorStore, expansion_id: str
) -> float | None:
    """Seconds from the barrier snapshot until the group's commits reached it (probe-seen)."""
    from airflow_samza_expand.core._clock import parse_iso

    record = store.get_expansion(expansion_id)
    times = record.steps.get("barrier_snapshot") if record is not None else None
    snap = times.ended_at if times is not None else None
    if reached is None or not snap:
        return None
    return round(max(reached - parse_iso(snap).timestamp(), 0.0), 3)


__all__ = ["Probe", "drain_s", "seconds_between"]
