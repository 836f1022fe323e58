"""A driver started again by its cluster manager (restartPolicy, maxAppAttempts, job retries)
in the middle of an expansion, without Spark: the lifecycle's choice of what to run, on a
real broker (lease, group commits) and the coordinator store. docs/operations.md, "Driver
restarts", has the whole table; these are the moments where the choice is the runtime's own.
"""

from __future__ import annotations

import dataclasses

import pytest
from spark_helpers import create_topic, planned_growth
from test_spark_lifecycle import TTL_S, WAIT_S, in_thread

from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand.core._plan import plan_expansion
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.spark._lifecycle import Lifecycle
from airflow_samza_expand.store._files import FileCoordinatorStore

pytestmark = [pytest.mark.kafka]


@pytest.fixture
def restarted(kafka_bootstrap, unique_topic, tmp_path):
    """A job on v1 (topic of 2 partitions) and a factory of its restarted drivers."""
    topic = unique_topic("orders")
    create_topic(kafka_bootstrap, topic, 4)  # the grown topic: v2 reads 4
    job = "job-" + topic
    store = FileCoordinatorStore(str(tmp_path), job)
    v1 = store.write_job_model(JobModel.initial(job, {topic: 2}))
    made: list[Lifecycle] = []

    def make(pid: str) -> Lifecycle:
        life = Lifecycle(store, job, pid, client_config(kafka_bootstrap), ttl_s=TTL_S)
        life.consumer_group = job
        life.version = store.latest_job_model().version  # what `runtime.Job.prepare` sets
        made.append(life)
        life.join()
        return life

    make.store, make.topic, make.v1, make.bootstrap = store, topic, v1, kafka_bootstrap
    yield make
    for life in made:
        life.close()


def commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    from confluent_kafka import TopicPartition

    from airflow_samza_expand._kafka.clients import Consumer

    consumer = Consumer({**client_config(bootstrap), "group.id": group})
    try:
        tps = [TopicPartition(topic, p, o) for p, o in offsets.items()]
        consumer.commit(offsets=tps, asynchronous=False)
    finally:
        consumer.close()


def test_started_before_the_barrier_of_the_next_model_passed_it_resumes_on_the_older(restarted):
    store, topic = restarted.store, restarted.topic
    # in-app: v2 is written before its barrier passes (the runtime restarts its query once
    # the group's commits reach H); the driver died in between and is started again
    growth = planned_growth(store.job_name, topic, f"{store.job_name}~{topic}.2-4")
    barrier = {topic: {"0": 5, "1": 7}}
    store.put_expansion(
        dataclasses.replace(growth, status="expanded", barrier=barrier), expected_revision=0
    )
    store.write_job_model(plan_expansion(restarted.v1, {topic: 2}, {topic: 4}).new_job_model)
    again = restarted("again")
    assert again.wait_to_process(1).version == 1  # not v2: its barrier has not passed
    # once the group's commits reach H, v2 is the model to run (the running driver's in-app
    # switch does the same from its own commits)
    commit(restarted.bootstrap, store.job_name, topic, {0: 5, 1: 7})
    assert again.runnable_model(1).version == 2


def test_started_after_a_stop_record_it_is_parked_not_stopped_again(restarted):
    store = restarted.store
    store.request_stop(1, "test: the stop of a handover")  # the processors of then stopped
    again = restarted("again")  # ... and one is started again by its cluster manager
    thread, out = in_thread(lambda: again.wait_to_process(1))
    # it neither exits (a restart policy "always" would start it again: a loop) nor runs the
    # stopped version: it heartbeats `stopped` (the stop step never waits for it)
    again.lease.wait_until_active(timeout_s=WAIT_S)

    def parked() -> bool:
        record = store.processors().get("again") or {}
        return (record.get("state"), record.get("role")) == ("stopped", "standby")

    thread.join(3 * TTL_S)
    assert parked() and thread.is_alive(), out
    # the restart's job model is written: it runs it
    store.write_job_model(dataclasses.replace(restarted.v1, version=2))
    thread.join(WAIT_S)
    assert out["value"].version == 2 and not again.parked
    again.guard("a test batch")
    # a stop that comes while it runs stops it
    store.request_stop(2, "test: the next stop")
    assert again.check_stop()
