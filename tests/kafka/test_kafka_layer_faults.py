"""Broker faults (development broker only): retryable errors, and a correct state after retry."""

from __future__ import annotations

import pytest
from kafka_test_data import model

from airflow_samza_expand._kafka.admin import KafkaAdmin, KafkaUnavailableError
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand._protocol.barrier.reads import barrier_status, snapshot_barrier
from airflow_samza_expand.core.errors import ExpansionError
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore


@pytest.fixture
def config(dev_broker):
    return client_config(dev_broker.bootstrap)


def test_job_model_write_applied_then_timed_out_is_a_noop_on_retry(
    dev_broker, config, unique_topic
):
    job = unique_topic("job")
    v2 = model(job, 2, variant="b")
    with KafkaCoordinatorStore(config, job, timeout_s=15) as store:
        store.write_job_model(model(job, 1))
    dev_broker.faults.inject("Produce", "apply_then_timeout", times=1)
    with KafkaCoordinatorStore(config, job, timeout_s=3) as flaky:
        # Whether librdkafka's own retry lands inside the 3 s is timing: both outcomes are
        # correct. A refusal (an ExpansionError, e.g. a race lost against its own record) is not.
        try:
            written = flaky.write_job_model(v2)
        except KafkaUnavailableError as exc:  # retryable, names the broker
            assert not isinstance(exc, ExpansionError)
            assert dev_broker.bootstrap in str(exc)
        else:
            assert written == v2
    assert dev_broker.faults.hits("Produce") == 1  # the applied write's answer was really lost
    # the retry (a new task try: a new writer) finds its own v2 in force and changes nothing
    with KafkaCoordinatorStore(config, job, timeout_s=15) as retry:
        assert retry.write_job_model(v2) == v2
        assert [m.version for m in retry.job_model_history()] == [1, 2]
        assert retry.job_model(2) == v2


def test_barrier_offset_reads_fail_retryably(dev_broker, config, unique_topic):
    topic = unique_topic("orders")
    admin = KafkaAdmin(config, timeout_s=5)
    admin.ensure_topic(topic, 2)
    dev_broker.faults.inject("ListOffsets", "error", error="REQUEST_TIMED_OUT", times=None)
    with pytest.raises(KafkaUnavailableError):
        snapshot_barrier(admin, {topic: 2})
    dev_broker.faults.clear()
    barrier = snapshot_barrier(admin, {topic: 2})
    dev_broker.faults.inject("OffsetFetch", "drop_connection", times=None)
    with pytest.raises(KafkaUnavailableError):
        barrier_status(admin, "job", barrier)
    dev_broker.faults.clear()
    assert barrier_status(admin, "job", barrier).holds  # empty partitions: nothing to wait for


@pytest.mark.parametrize("error", ["COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR"])
def test_group_coordinator_errors_are_retryable_not_a_crash(
    dev_broker, config, unique_topic, error
):
    # AdminClient.list_consumer_group_offsets segfaults the process on these (librdkafka #5040)
    topic = unique_topic("orders")
    admin = KafkaAdmin(config, timeout_s=5)
    admin.ensure_topic(topic, 2)
    barrier = {topic: {0: 0, 1: 0}}
    dev_broker.faults.inject("OffsetFetch", "error", error=error, times=1)
    with pytest.raises(KafkaUnavailableError, match=dev_broker.bootstrap):
        barrier_status(admin, "job", barrier)
    assert barrier_status(admin, "job", barrier).holds  # the next poll works
    admin.close()


@pytest.mark.parametrize(
    "error", ["NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE", "UNKNOWN_TOPIC_OR_PARTITION", 0]
)
def test_store_reads_wait_while_the_coordinator_leader_moves(
    dev_broker, config, unique_topic, error
):
    """While the coordinator topic's leader moves, its end offset is answered with these
    errors (or, error 0, with no offset): the read asks again instead of failing or taking
    -1 as the end of the log."""
    job = unique_topic("job")
    with KafkaCoordinatorStore(config, job, timeout_s=15) as store:
        store.write_job_model(model(job, 1))
    dev_broker.faults.inject("ListOffsets", "error", error=error, times=2)
    with KafkaCoordinatorStore(config, job, timeout_s=15) as reader:
        assert reader.job_model(1) == model(job, 1)
    assert dev_broker.faults.hits("ListOffsets") == 2


def test_the_demo_verifier_waits_through_a_moved_group_coordinator(
    dev_broker, config, unique_topic
):
    """The demo's (and the fault matrix's) wait for the job to catch up reads the group's
    committed offsets; a group coordinator that moves answers NOT_COORDINATOR for a moment (a
    cluster fault-matrix run ended there, on a green expansion): the wait asks again."""
    from airflow_samza_expand._demo.jobs import caught_up, wait_for

    topic = unique_topic("orders")
    with KafkaAdmin(config, timeout_s=5) as admin:
        admin.ensure_topic(topic, 2)
        dev_broker.faults.inject("OffsetFetch", "error", error="NOT_COORDINATOR", times=2)
        assert wait_for("the group to catch up", lambda: caught_up(admin, "job", topic),
                        timeout_s=30, interval_s=0.05)  # fmt: skip
        assert dev_broker.faults.hits("OffsetFetch") >= 2
        dev_broker.faults.inject("OffsetFetch", "error", error="NOT_COORDINATOR", times=None)
        with pytest.raises(TimeoutError, match="NOT_COORDINATOR|Not coordinator"):
            wait_for("the group to catch up", lambda: caught_up(admin, "job", topic),
                     timeout_s=1, interval_s=0.05)  # fmt: skip
