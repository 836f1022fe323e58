"""Record kinds of the coordinator store and the processor vocabulary.

The records: docs/internals.md 'The coordinator topic'."""

from __future__ import annotations

from airflow_samza_expand.core._names import coordinator_topic

JOB_MODEL = "job-model"
EXPANSION = "expansion"
LEASE = "lease"
CONTROL = "control"
PROCESSOR = "processor"
# a processor's count of stale placements before an expansion's snapshot (core._order
# JobStaleCount), keyed by the expansion id: the barrier takes it instead of scanning
STALE_COUNT = "stale-count"
LEGACY_EXPANSION = "expansion-doc"  # the untyped expansion documents (store._backend.Backend)
STOP_KEY = "stop"
PROCESSOR_STATES = frozenset({"starting", "standby", "running", "stopping", "stopped", "failed"})
PROCESSOR_ROLES = frozenset({"active", "standby"})

__all__ = [
    "CONTROL",
    "EXPANSION",
    "JOB_MODEL",
    "LEASE",
    "LEGACY_EXPANSION",
    "PROCESSOR",
    "PROCESSOR_ROLES",
    "PROCESSOR_STATES",
    "STALE_COUNT",
    "STOP_KEY",
    "coordinator_topic",
]
