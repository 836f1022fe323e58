"""The growth watch (not a step of the expansion): has a topic's partition count changed?"""

from __future__ import annotations

from airflow_samza_expand.core.errors import UnknownTopicError
from airflow_samza_expand.kafka.admin import KafkaAdmin
from airflow_samza_expand.protocol.poll import Poll


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


__all__ = ["partition_count_or_zero", "partition_count_poll"]
