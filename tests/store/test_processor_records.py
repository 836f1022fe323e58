"""Processor records of both stores: role and TTL in the heartbeat, tombstone of a dead one."""

from __future__ import annotations

import pytest

from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand._testing.liveness import heartbeat_dead
from airflow_samza_expand.core._liveness import dead_processors, is_alive
from airflow_samza_expand.store._files import FileCoordinatorStore
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore


@pytest.fixture(params=["files", "kafka"])
def store(request, tmp_path, unique_topic):
    if request.param == "files":
        made = FileCoordinatorStore(str(tmp_path), "orders-counter")
    else:
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        made = KafkaCoordinatorStore(client_config(bootstrap), unique_topic("job"), timeout_s=15)
    yield made
    made.close()


def test_heartbeat_carries_role_and_ttl_and_stays_compatible(store):
    store.heartbeat("old-style", 3, "running")
    store.heartbeat("a", 3, "running", role="active", ttl_s=12.5)
    store.heartbeat("b", 4, "standby", role="standby", ttl_s=30)
    records = store.processors()
    assert set(records["old-style"]) == {"job_model_version", "state", "heartbeat_at"}
    assert records["a"]["role"] == "active" and records["a"]["ttl"] == 12.5
    assert records["b"]["state"] == "standby" and records["b"]["role"] == "standby"
    assert all(is_alive(r) for r in records.values())


def test_bad_role_or_ttl_changes_nothing(store):
    with pytest.raises(ValueError, match="role"):
        store.heartbeat("a", 1, "running", role="leader")
    with pytest.raises(ValueError, match="ttl_s"):
        store.heartbeat("a", 1, "running", ttl_s=0)
    assert store.processors() == {}


def test_dead_processor_record_is_tombstoned(store):
    heartbeat_dead(store, "dead", 1)
    store.heartbeat("live", 1, "running", role="active", ttl_s=60)
    dead = dead_processors(store.processors())
    assert sorted(dead) == ["dead"]
    for pid in dead:
        store.remove_processor(pid)
    store.remove_processor("never-existed")  # idempotent
    assert sorted(store.processors()) == ["live"]


def test_a_processors_stale_count_is_one_record_per_expansion(store):
    """Stale placements before the snapshot, counted by the job: a processor publishes its count
    per expansion (the barrier takes it); a replayed or repeated publish replaces it, never adds
    to it."""
    from airflow_samza_expand.core._order import JobStaleCount
    from airflow_samza_expand.core._stale import StalePlacement, StaleSummary

    assert store.stale_count("exp-1") is None
    # a stale key named like a secret setting still fits (keys are a list, not JSON keys)
    summary = StaleSummary().add([StalePlacement("orders", 0, 12, "password", 3)])
    count = JobStaleCount("exp-1", "proc-1", 1, {"orders": {0: 13, 1: 9}}, summary, "t")
    store.put_stale_count(count)
    store.put_stale_count(count)
    assert store.stale_count("exp-1") == count
    assert store.stale_count("exp-2") is None
