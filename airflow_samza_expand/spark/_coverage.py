"""Partitions of the input topics that the running job model does not cover.

A topic grown by someone else (or by an expansion planned for another job) has partitions the
processor never reads: it reads only its job model's SSPs (assign, never subscribe). The
processor says so: a warning at start and then every ``interval_s`` while it lasts, and an
``uncovered`` field ({topic: [partition, ...]}) in its heartbeat.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 60.0

LiveCounts = Callable[[Sequence[str]], Mapping[str, int]]


def uncovered_partitions(
    model_counts: Mapping[str, int], live_counts: Mapping[str, int]
) -> dict[str, list[int]]:
    """{topic: partitions >= the model's count} for each topic that has more live partitions."""
    return {
        topic: list(range(int(model_counts[topic]), int(live)))
        for topic, live in sorted(live_counts.items())
        if topic in model_counts and int(live) > int(model_counts[topic])
    }


def describe(uncovered: Mapping[str, Sequence[int]], version: int) -> str:
    parts = "; ".join(f"{t} partitions {list(ps)}" for t, ps in sorted(uncovered.items()))
    return (
        f"input partitions not covered by job model v{version}, never read by this job: "
        f"{parts} - the topic grew outside this job's expansion; expand this job too (plan it "
        "with the topic's live counts, e.g. follow_live_counts=True)"
    )


def admin_live_counts(config: Mapping[str, Any], timeout_s: float = 30.0) -> LiveCounts:
    """Live partition counts through a confluent-kafka AdminClient (one metadata request)."""
    from airflow_samza_expand._kafka.clients import AdminClient

    client = AdminClient(dict(config))

    def counts(topics: Sequence[str]) -> dict[str, int]:
        metadata = client.list_topics(timeout=timeout_s)
        return {t: len(metadata.topics[t].partitions) for t in topics if t in metadata.topics}

    return counts


class CoverageWatch:
    """Checks the live counts at most every ``interval_s``; `current` is the last finding."""

    def __init__(
        self,
        model_counts: Mapping[str, int],
        version: int,
        live_counts: LiveCounts,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.model_counts = dict(model_counts)
        self.version = version
        self.live_counts = live_counts
        self.interval_s = float(interval_s)
        self.clock = clock
        self.current: dict[str, list[int]] = {}
        self._next = float("-inf")

    def poll(self) -> dict[str, list[int]]:
        """The uncovered partitions (re-read when due; a failed read keeps the last finding)."""
        now = self.clock()
        if now < self._next:
            return self.current
        self._next = now + self.interval_s
        try:
            live = self.live_counts(sorted(self.model_counts))
        except Exception as exc:  # a metadata hiccup must not stop the processor
            log.warning("could not read the input topics' partition counts: %s", exc)
            return self.current
        self.current = uncovered_partitions(self.model_counts, live)
        if self.current:
            log.warning("%s", describe(self.current, self.version))
        return self.current


__all__ = [
    "CoverageWatch",
    "admin_live_counts",
    "describe",
    "uncovered_partitions",
]
