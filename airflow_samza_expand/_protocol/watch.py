"""The growth watch (not a step of the expansion): has a topic's partition count changed?"""

from __future__ import annotations

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._protocol.poll import Poll
from airflow_samza_expand.core.errors import UnknownTopicError
from airflow_samza_expand.store._coordinator_store import CoordinatorStore


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


def job_model_count_poll(
    admin: KafkaAdmin, store: CoordinatorStore, topic: str, reported: int | None
) -> Poll:
    """Done when the topic's count differs from the count the job's newest job model covers
    (the baseline lives in the coordinator store: a watch restarted anywhere, a new triggerer,
    still sees a growth it did not see happen), unless this watch already `reported` it."""
    count = partition_count_or_zero(admin, topic)
    model = store.latest_job_model()
    covered = model.partition_counts().get(topic) if model is not None else None
    if covered is None:
        return Poll(False, f"watching {topic}: {count} partitions; job {store.job_name} has no "
                    "job model reading it (yet) - check the watch's job_name")  # fmt: skip
    version = f"job model v{model.version} of {store.job_name}"  # type: ignore[union-attr]
    if count != covered and count != reported:
        result = {"topic": topic, "baseline": covered, "partition_count": count}
        return Poll(True, f"topic {topic} has {count} partitions, {version} {covered}", result)
    return Poll(
        False,
        f"watching {topic}: {count} partitions, {version} covers {covered}",
        detail={"baseline": covered},
    )


__all__ = ["job_model_count_poll", "partition_count_or_zero", "partition_count_poll"]
