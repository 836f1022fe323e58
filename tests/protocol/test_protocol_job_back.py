"""The plan's wait for a job that is down (DAG owning no launch) ends on a processor whose
capabilities are final: a driver heartbeats ``starting`` while its query starts, before it knows
whether it reads with Spark's own source (in-app) - a plan deciding then would refuse an in-app
restart the job can do."""

from __future__ import annotations

from pathlib import Path

import pytest
from file_stores import job_store

from airflow_samza_expand._protocol.steps.plan.wait import (
    JobDownError,
    job_back_poll,
    require_live,
)
from airflow_samza_expand.store._files import FileCoordinatorStore

JOB = "orders-counter"


@pytest.fixture
def store(tmp_path: Path) -> FileCoordinatorStore:
    return job_store(tmp_path, JOB)


def test_a_starting_driver_is_not_back_yet_its_first_running_heartbeat_is(store) -> None:
    store.heartbeat("p-1", 1, "starting", ttl_s=30, capabilities=["standby"])
    waiting = job_back_poll(store)
    assert not waiting.done
    assert "starting" in waiting.message and "p-1" in waiting.message, waiting.message
    with pytest.raises(JobDownError, match="starting on job model v1"):
        require_live(store, JOB)
    store.heartbeat("p-1", 1, "running", ttl_s=30, capabilities=["standby", "in-app"])
    back = job_back_poll(store)
    assert back.done and back.detail["live"] == ["p-1"], back
    require_live(store, JOB)


def test_a_standby_is_back(store) -> None:
    """A warm standby waiting for the lease has said all it can do."""
    store.heartbeat("p-2", 1, "standby", ttl_s=30, capabilities=["standby"])
    assert job_back_poll(store).done
