"""The job page on a host that did not launch the job (the api-server of a deployment with
several workers): it says where the launch's log is (host and path) and shows what any host
can read - the launch as the expansion record keeps it and the heartbeats of its version's
processors - instead of a tail it cannot read."""

from __future__ import annotations

from ui_helpers import planned_record

from airflow_samza_expand._protocol.job import launch as detached
from airflow_samza_expand.airflow._ui.data import read_job
from airflow_samza_expand.airflow._ui.html import job_page
from airflow_samza_expand.airflow._ui.running import running_view
from airflow_samza_expand.airflow._ui.settings import UiSettings
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._files import FileCoordinatorStore

JOB = "orders-counter"


def test_the_page_names_the_host_and_path_of_a_log_it_cannot_read(tmp_path, monkeypatch):
    store = FileCoordinatorStore(str(tmp_path / "store"), JOB)
    v1 = store.write_job_model(JobModel.initial(JOB, {"orders": 2}))
    record = planned_record(v1, {"orders": 4})
    logs = tmp_path / "logs"  # an allowed log directory on this host, the file is not here
    logs.mkdir()
    log = str(logs / "spark-submit-1.log")
    facts = {"launch_id": "a1b2c3", "launched_at": record.created_at, "host": "worker-a",
             "application": "job.py", "attempt": 1, "window_s": 300.0, "log_path": log}  # fmt: skip
    store.put_expansion(record.with_result("launch", facts), expected_revision=0)
    store.heartbeat("worker-a-4242", 2, "failed", role="active", ttl_s=30)
    monkeypatch.setenv(detached.HOST_ENV, "api-server")
    settings = UiSettings(coordinator=str(tmp_path / "store"), discover=False,
                          log_dirs=(str(logs),))  # fmt: skip
    snap = read_job(settings, JOB)
    assert snap.log is not None and snap.log.path == log and snap.log.text == ""
    note = snap.log.note
    assert "on worker-a at this path" in note and "this page runs on api-server" in note, note
    assert "launch a1b2c3" in note and "attempt 1" in note and "application job.py" in note
    assert "processor worker-a-4242 failed" in note, note
    page = job_page(snap, "/", "")
    assert "worker-a-4242" in page and log in page
    running = running_view(snap)  # the live part: each launch with its host
    assert running is not None and running["launches"][0]["host"] == "worker-a", running
    assert "on worker-a" in running["log"]["note"]
    # the same page on the launching host shows the tail as before
    (logs / "spark-submit-1.log").write_text("started\nbatch 1 done\n")
    monkeypatch.setenv(detached.HOST_ENV, "worker-a")
    assert "batch 1 done" in read_job(settings, JOB).log.text
