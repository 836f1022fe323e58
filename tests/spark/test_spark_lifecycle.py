"""The job's processor lifecycle without Spark: lease + coordinator store on a real broker."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand._testing.liveness import heartbeat_dead
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.spark._lifecycle import LeaseLostError, Lifecycle
from airflow_samza_expand.store._files import FileCoordinatorStore

pytestmark = [pytest.mark.kafka]

TTL_S = 6.0
WAIT_S = 60.0


@pytest.fixture
def lives(kafka_bootstrap, unique_topic, tmp_path):
    job = unique_topic("life")
    store = FileCoordinatorStore(str(tmp_path), job)
    store.write_job_model(JobModel.initial(job, {"orders": 2}))
    made: list[Lifecycle] = []

    def make(pid: str, version: int) -> Lifecycle:
        life = Lifecycle(store, job, pid, client_config(kafka_bootstrap), ttl_s=TTL_S)
        life.version = version
        made.append(life)
        life.join()
        return life

    make.store = store
    yield make
    for life in made:
        life.close()


def in_thread(target):
    out: dict = {}
    thread = threading.Thread(target=lambda: out.setdefault("value", target()), daemon=True)
    thread.start()
    return thread, out


def test_standby_for_the_next_version_waits_for_it_after_the_handover(lives):
    store = lives.store
    v1 = store.latest_job_model()
    old = lives("old", 1)
    assert old.wait_to_process(1).version == 1
    new = lives("new", 2)
    thread, out = in_thread(lambda: new.wait_to_process(2))
    old.release()  # the race: vN lets go before vN+1 is written
    assert new.lease.wait_until_active(timeout_s=WAIT_S)
    thread.join(3 * TTL_S)
    assert thread.is_alive(), f"the standby returned {out} although v2 does not exist"
    assert store.processors()["new"]["state"] == "standby"
    store.write_job_model(dataclasses.replace(v1, version=2))
    thread.join(WAIT_S)
    assert out["value"].version == 2
    new.guard("a test batch")  # it holds the lease, confirmed by the broker


def test_a_stop_for_its_version_ends_the_standby(lives):
    active = lives("active", 1)
    assert active.wait_to_process(1) is not None
    standby = lives("standby", 1)
    thread, out = in_thread(lambda: standby.wait_to_process(1))
    lives.store.request_stop(1, "test")
    thread.join(WAIT_S)
    assert out == {"value": None}


def test_a_standby_that_gets_the_lease_of_a_stopping_version_does_not_start(lives):
    active = lives("active", 1)
    assert active.wait_to_process(1) is not None
    hot = lives("hot", 1)  # a hot standby of v1 (the handover's v2 standby waits beside it)
    lives.store.request_stop(1, "expansion")
    active.release()  # v1's last batch is committed: the lease moves on
    assert hot.lease.wait_until_active(timeout_s=WAIT_S)
    assert hot.wait_to_process(1) is None  # not v1: a stop for v1 is pending


def test_guard_raises_once_the_lease_is_lost(lives):
    first = lives("first", 1)
    assert first.wait_to_process(1) is not None
    second = lives("second", 1)
    first.lease.pause_polling()  # a hung driver: the broker moves the lease on
    assert second.lease.wait_until_active(timeout_s=WAIT_S)
    first.lease.resume_polling()
    with pytest.raises(LeaseLostError, match="lost the active lease"):
        first.guard("committing offsets")


def test_dead_records_are_reaped_on_start(lives):
    heartbeat_dead(lives.store, "ghost", 1)
    life = lives("fresh", 1)
    assert life.reap_dead() == ["ghost"]
    assert "ghost" not in lives.store.processors()


def test_heartbeats_advertise_the_standby_capability_only_with_the_lease(tmp_path) -> None:
    """docs/design.md 'How a restart is chosen': the DAG launches a warm standby only for a
    processor that says it can wait as one; the shipped job can while it uses the active lease."""
    from airflow_samza_expand.core._liveness import statuses
    from airflow_samza_expand.store._files import FileCoordinatorStore as Files

    store = Files(str(tmp_path), "caps")
    store.write_job_model(JobModel.initial("caps", {"orders": 2}))
    Lifecycle(store, "caps", "leased", {}, use_lease=True).heartbeat("running")
    Lifecycle(store, "caps", "bare", {}, use_lease=False).heartbeat("running")
    switching = Lifecycle(store, "caps", "switching", {}, use_lease=False)
    switching.in_place = True  # read_kafka(source="python")
    switching.heartbeat("running")
    counting = Lifecycle(store, "caps", "counting", {}, use_lease=False)
    counting.in_place = counting.counts_stale = True  # the provider's reader
    counting.heartbeat("running")
    seen = statuses(store.processors())
    assert seen["leased"].capabilities == ("standby",)
    assert seen["bare"].capabilities == ()
    assert seen["switching"].capabilities == ("in-place",)
    assert seen["counting"].capabilities == ("counts-stale", "in-place")
