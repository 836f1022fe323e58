"""Reader discovery (the plan's `other_jobs` check) on a secured Apache Kafka, the airflow
principal holding exactly its documented least-privilege ACLs (kafka.acls).

Kafka shows a principal only the topics and groups it may DESCRIBE: without ACLs for discovery
the other managed job's coordinator topic and the unmanaged group are invisible, and
``other_jobs="refuse"`` lets the growth through silently.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from airflow_samza_expand._kafka.acls import resolve
from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._protocol.steps.plan.readers import (
    OtherJobsReadTopicError,
    check_other_jobs,
    find_readers,
)
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore


def test_discovery_with_least_privilege_acls_sees_other_jobs_and_groups(
    principal, admin_config, secured_topic
) -> None:
    topic = secured_topic("orders")
    suffix = uuid.uuid4().hex[:8]
    ours, other, outsider = f"ours-{suffix}", f"other-{suffix}", f"analytics-{suffix}"
    for job in (ours, other):  # two managed jobs read the topic (written by the admin)
        with KafkaCoordinatorStore(admin_config, job) as store:
            store.write_job_model(JobModel.initial(job, {topic: 2}))
    consumer = Consumer({**admin_config, "group.id": outsider, "enable.auto.commit": False})
    try:  # a consumer group outside the provider with a committed offset on the topic
        consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    finally:
        consumer.close()

    airflow = principal(resolve("airflow", job=ours, inputs=[topic]), name="airflow")
    with KafkaAdmin(airflow) as admin:
        readers = find_readers(admin, [topic])

    assert readers.managed == {topic: tuple(sorted((ours, other)))}
    assert outsider in readers.unmanaged[topic]
    with pytest.raises(OtherJobsReadTopicError, match=other):
        check_other_jobs(ours, readers, "refuse")
