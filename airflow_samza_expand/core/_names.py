"""Names a job's Kafka resources take from its job name (pure): the coordinator topic, which the
Kafka adapters (ACLs) and the coordinator stores both name."""

from __future__ import annotations

_LEGAL_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def coordinator_topic(job_name: str) -> str:
    """Samza's coordinator topic name of a job: `__samza_coordinator_<job>`."""
    topic = f"__samza_coordinator_{job_name}"
    if not job_name or set(job_name) - _LEGAL_TOPIC_CHARS or len(topic) > 249:
        raise ValueError(
            f"job name {job_name!r} cannot name a Kafka topic - use 1-229 characters "
            "of a-z, A-Z, 0-9, '.', '_' and '-'"
        )
    return topic


__all__ = ["coordinator_topic"]
