"""Discovery of a topic's readers on real Kafka: the managed jobs whose job model reads it, the
consumer groups outside the provider with committed offsets on it; and the other_jobs rule."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand._protocol.steps.plan.readers import (
    OtherJobsReadTopicError,
    TopicReaders,
    check_other_jobs,
    find_readers,
    normalise_other_jobs,
)
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

pytestmark = pytest.mark.kafka


def commit(config: dict, group: str, topic: str, partition: int, offset: int) -> None:
    consumer = Consumer({**config, "group.id": group, "enable.auto.commit": "false"})
    try:
        consumer.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)
    finally:
        consumer.close()


def managed_job(config: dict, topics: dict[str, int]) -> str:
    name = f"job-{uuid.uuid4().hex[:10]}"
    with KafkaCoordinatorStore(config, name) as store:
        store.write_job_model(JobModel.initial(name, topics))
    return name


def test_find_readers_managed_jobs_and_unmanaged_groups(kafka_bootstrap, unique_topic):
    config = client_config(kafka_bootstrap)
    topic, elsewhere = unique_topic("orders"), unique_topic("payments")
    with KafkaAdmin(config, timeout_s=15) as admin:
        admin.ensure_topic(topic, 2)
        admin.ensure_topic(elsewhere, 2)
        job_a = managed_job(config, {topic: 2})
        job_b = managed_job(config, {topic: 2, elsewhere: 2})
        job_c = managed_job(config, {elsewhere: 2})  # reads another topic only
        outsider = f"billing-{uuid.uuid4().hex[:6]}"
        commit(config, outsider, topic, 1, 3)
        commit(config, job_a, topic, 0, 5)  # a managed job's own group: not "unmanaged"
        commit(config, "samza-expand-figures", topic, 0, 1)  # the provider's own group
        commit(config, f"idle-{uuid.uuid4().hex[:6]}", elsewhere, 0, 1)  # reads elsewhere

        readers = find_readers(admin, [topic])

    assert readers.managed[topic] == tuple(sorted([job_a, job_b]))
    assert job_c not in readers.jobs()
    assert readers.unmanaged[topic] == (outsider,)
    assert readers.to_dict()["unmanaged_groups"] == {topic: [outsider]}


def test_find_readers_configured_list_limits_the_managed_jobs(kafka_bootstrap, unique_topic):
    config = client_config(kafka_bootstrap)
    topic = unique_topic("orders")
    with KafkaAdmin(config, timeout_s=15) as admin:
        admin.ensure_topic(topic, 2)
        job_a = managed_job(config, {topic: 2})
        managed_job(config, {topic: 2})
        readers = find_readers(admin, [topic], managed_jobs=[job_a])
    assert readers.jobs() == [job_a]


def readers_of(topic: str, jobs: list[str], groups: list[str] = ()) -> TopicReaders:
    return TopicReaders({topic: tuple(jobs)}, {topic: tuple(groups)})


def test_check_other_jobs_refuses_naming_every_job_and_the_fix():
    readers = readers_of("orders", ["job-a", "job-b"])
    for choice in ("refuse", "include"):
        with pytest.raises(OtherJobsReadTopicError) as err:
            check_other_jobs("job-a", readers, choice)
        text = str(err.value)
        assert "job-a" in text and "job-b" in text and "orders" in text
        assert "other_jobs='ignore'" in text and "jobs=['job-a', 'job-b']" in text


def test_check_other_jobs_include_with_the_run_jobs_and_ignore_warn():
    readers = readers_of("orders", ["job-a", "job-b"], ["billing"])
    included = check_other_jobs("job-a", readers, "include", co_jobs=["job-b"])
    assert included == [
        "consumer group(s) outside this provider read orders: billing - a growth moves keys "
        "to new partitions; any keyed state they keep must follow"
    ]
    ignored = check_other_jobs("job-a", readers, "ignore")
    assert len(ignored) == 2 and "job-b" in ignored[0] and "NOT expanded" in ignored[0]
    assert check_other_jobs("job-a", readers_of("orders", ["job-a"]), "refuse") == []


def test_normalise_other_jobs_names_the_choices():
    assert normalise_other_jobs(" Ignore ") == "ignore"
    assert normalise_other_jobs(None) == "refuse"
    choices = "'refuse', 'include', 'ignore'"
    with pytest.raises(ValueError, match=f"other_jobs='skip' is not known - use one of {choices}"):
        normalise_other_jobs("skip")
