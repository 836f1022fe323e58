"""What the job page and its JSON say is true in each state of the records (issue 28): leases,
processors, the stop request, the store, the unknown-job advice, the job log. File store, no
Kafka, no server."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from airflow_samza_expand.airflow.ui.data import read_job
from airflow_samza_expand.airflow.ui.html import job_page
from airflow_samza_expand.airflow.ui.settings import UiSettings
from airflow_samza_expand.airflow.ui.views import snapshot_json
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.core.plan import plan_expansion
from airflow_samza_expand.store.files import FileCoordinatorStore

JOB = "orders-job"


def _settings(root: Path, *log_dirs: Path) -> UiSettings:
    return UiSettings(coordinator=str(root), discover=False, log_dirs=tuple(map(str, log_dirs)))


def _store(root: Path, *, grown: bool = True) -> FileCoordinatorStore:
    """Job model v1 (orders: 2) and, when `grown`, v2 (orders: 4)."""
    store = FileCoordinatorStore(str(root), JOB)
    v1 = store.write_job_model(JobModel.initial(JOB, {"orders": 2}))
    if grown:
        store.write_job_model(plan_expansion(v1, {"orders": 2}, {"orders": 4}).new_job_model)
    return store


def _page_and_json(root: Path, *log_dirs: Path) -> tuple[str, str]:
    snap = read_job(_settings(root, *log_dirs), JOB)
    return job_page(snap, "/samza-expand", ""), json.dumps(snapshot_json(snap))


def test_a_released_lease_shows_as_released(tmp_path):
    store = _store(tmp_path)
    store.release_lease(store.acquire_lease("expansion", "airflow:dag/run-1", ttl_s=600))

    snap = read_job(_settings(tmp_path), JOB)

    (lease,) = snap.leases or []
    assert (lease.name, lease.released, lease.expired, lease.expires_in_s) == (
        "expansion",
        True,
        False,
        None,
    )
    page = job_page(snap, "/samza-expand", "")
    assert "released" in page and "expired" not in page and "expires in" not in page
    (doc,) = snapshot_json(snap)["leases"]
    assert doc["released"] is True and doc["expired"] is False and doc["expires_in_s"] is None


def test_a_stopped_processor_gets_no_coverage_warning_and_ages_are_not_negative(tmp_path):
    from airflow_samza_expand.airflow.ui.decode import age_s

    store = _store(tmp_path)
    store.heartbeat("v1", 1, "stopped", role="active", ttl_s=30, uncovered={"orders": [2, 3]})
    store.heartbeat("v1-live", 1, "running", role="active", ttl_s=30, uncovered={"orders": [2]})

    page, _ = _page_and_json(tmp_path)

    assert "does not read orders partitions [2, 3]" not in page
    assert "does not read orders partitions [2]" in page  # a live one still warns
    now = datetime.now(UTC)
    ahead = (now + timedelta(milliseconds=40)).isoformat()  # a writer's clock a little ahead
    assert age_s(ahead, now) == 0.0 and str(age_s(ahead, now)) == "0.0"
    assert "-0.0" not in page
