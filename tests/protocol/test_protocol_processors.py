"""docs/design.md 'Processors and the active lease' in the protocol: a dead processor is never
acknowledged and never blocks a stop."""

from __future__ import annotations

import pytest
from file_stores import job_store

from airflow_samza_expand._protocol.steps import ack, standby, stop
from airflow_samza_expand._protocol.steps.submit import before_submit
from airflow_samza_expand._testing.liveness import heartbeat_dead

JOB = "orders-counter"


@pytest.fixture
def store(tmp_path):
    return job_store(tmp_path, JOB)


def test_dead_processor_is_not_acknowledged(store):
    heartbeat_dead(store, "dead", 1)
    store.heartbeat("standby", 1, "standby", role="standby", ttl_s=30)
    poll = ack.ack_poll(store, 1)
    assert not poll.done and poll.detail["running"] == []
    store.heartbeat("live", 1, "running", role="active", ttl_s=30)
    poll = ack.ack_poll(store, 1)
    assert poll.done and poll.result["running"] == ["live"]


def test_dead_processor_does_not_block_the_stop_and_is_removed(store):
    heartbeat_dead(store, "dead", 1)
    store.heartbeat("live", 1, "running", role="active", ttl_s=30)
    poll = stop.stop_poll(store, 1)
    assert not poll.done and "live" in poll.message and "dead" in poll.message
    assert "dead" not in store.processors()
    store.heartbeat("live", 1, "stopped", role="active", ttl_s=30)
    assert stop.stop_poll(store, 1).done


def test_stop_request_ignores_a_dead_processor_and_submit_launches(store):
    from airflow_samza_expand._protocol.steps.stop import request_stop

    heartbeat_dead(store, "dead", 1)
    decision = request_stop(store, "test")
    assert "nothing to stop" in decision.message
    assert before_submit(store, None, continuous=True).launch


def test_standby_poll_waits_while_the_new_version_warms_up(store):
    """The warm handover's stop waits for a warm vN+1: a standby still ``starting`` (JVM,
    SparkSession, workers) or a dead one does not count; ``standby`` or ``running`` does."""
    assert not standby.standby_poll(store, 2).done  # nothing heartbeats v2 yet
    store.heartbeat("v3", 3, "standby", role="standby", ttl_s=30)  # another version
    heartbeat_dead(store, "gone", 2, state="standby", role="standby")
    store.heartbeat("warming", 2, "starting", role="standby", ttl_s=30)
    poll = stop.stop_poll(store, 1)  # a warming v2 never blocks v1's stop
    assert poll.done
    poll = standby.standby_poll(store, 2)
    assert not poll.done and "warming (starting" in poll.message
    store.heartbeat("warming", 2, "standby", role="standby", ttl_s=30)
    poll = standby.standby_poll(store, 2)
    assert poll.done and poll.result == {"warm": ["warming"]}


def test_submit_logs_why_it_launches_or_not(store, caplog):
    """The submit step's log says why it launched or did not."""
    caplog.set_level("INFO", logger="airflow_samza_expand._protocol.steps.submit")
    assert before_submit(store, None, continuous=True).launch
    assert f"launching job {JOB} on job model v1" in caplog.text
    store.heartbeat("live", 1, "running", role="active", ttl_s=30)
    assert not before_submit(store, None, continuous=True).launch
    assert "already runs job model v1 (live): not launching it twice" in caplog.text
