"""The demo's and the fault matrices' stop of a job model (`_demo.jobs.stop_job`): it waits
for the live processors of that model, as the product's stop does (`core._liveness`), not for a
driver killed while it ran - its last heartbeat says ``running`` for ever (a cluster manager
starts the driver again under another processor id)."""

from __future__ import annotations

from pathlib import Path

import pytest
from file_stores import job_store

from airflow_samza_expand._demo.jobs import stop_job
from airflow_samza_expand._testing.liveness import heartbeat_dead
from airflow_samza_expand.store._files import FileCoordinatorStore


@pytest.fixture
def store(tmp_path: Path) -> FileCoordinatorStore:
    return job_store(tmp_path)


def test_a_driver_killed_on_the_model_does_not_hold_its_stop(store) -> None:
    heartbeat_dead(store, "host-101", 1)  # killed while it ran: silent past its TTL
    store.heartbeat("host-102", 1, "stopped", ttl_s=30, role="active")  # started again, stopped
    stop_job(store, 1, timeout_s=10)
    assert store.stop_request() is not None


def test_a_live_processor_of_the_model_holds_its_stop(store) -> None:
    store.heartbeat("host-101", 1, "stopped", ttl_s=30, role="active")
    store.heartbeat("host-102", 1, "running", ttl_s=30, role="active")
    with pytest.raises(TimeoutError, match="job model v1 to stop"):
        stop_job(store, 1, timeout_s=0.5)


def test_no_processor_that_ended_on_the_model_is_no_stop_yet(store) -> None:
    heartbeat_dead(store, "host-101", 1)
    with pytest.raises(TimeoutError, match="job model v1 to stop"):
        stop_job(store, 1, timeout_s=0.5)
