"""What the job page and its JSON say is true in each state of the records: leases,
processors, the stop request, the store, the unknown-job advice, the job log. File store, no
Kafka, no server."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from ui_helpers import planned_record

from airflow_samza_expand.airflow._ui.data import UiProblem, read_job
from airflow_samza_expand.airflow._ui.html import job_page
from airflow_samza_expand.airflow._ui.settings import UiSettings
from airflow_samza_expand.airflow._ui.views import snapshot_json
from airflow_samza_expand.core._plan import plan_expansion
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._files import FileCoordinatorStore

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
    from airflow_samza_expand.airflow._ui.decode import age_s

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


@pytest.mark.parametrize(
    ("grown", "in_force"), [(False, True), (True, False)], ids=["v1-runs", "v2-exists"]
)
def test_the_stop_request_is_text_and_in_force_only_while_it_applies(tmp_path, grown, in_force):
    store = _store(tmp_path, grown=grown)
    store.request_stop(1, "expansion orders 2->4 reached its barrier")

    snap = read_job(_settings(tmp_path), JOB)
    page = job_page(snap, "/samza-expand", "")

    assert "{'" not in page and "'version'" not in page
    assert "expansion orders 2-&gt;4 reached its barrier" in page
    assert ("Stop request in force" in page) is in_force
    assert ("no longer applies" in page) is not in_force
    stop = snapshot_json(snap)["stop_request"]
    assert (stop["version"], stop["in_force"]) == (1, in_force)
    assert stop["reason"] == "expansion orders 2->4 reached its barrier"


def test_the_store_is_described_without_a_repr_or_secrets(tmp_path):
    from airflow_samza_expand.airflow._ui.data import describe_store
    from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

    _store(tmp_path)
    page, doc = _page_and_json(tmp_path)
    assert "FileCoordinatorStore(" not in page + doc
    assert f"files in {tmp_path}" in page and json.loads(doc)["store"].startswith("files in ")

    config = {"bootstrap.servers": "kafka-1:9092", "sasl.password": "hunter2"}
    kafka = KafkaCoordinatorStore(config, JOB)
    try:
        text = describe_store(kafka)
    finally:
        kafka.close()
    assert text == f"Kafka topic __samza_coordinator_{JOB} on kafka-1:9092"
    remote = SimpleNamespace(location="s3://key:secret@bucket/x")  # a file store's location
    assert describe_store(remote) == "files in s3://bucket/x"


def test_the_unknown_job_message_advises_writing_v1(tmp_path):
    with pytest.raises(UiProblem) as problem:
        read_job(_settings(tmp_path), "no-such-job")
    message = problem.value.message
    assert "FileCoordinatorStore(" not in message and "files in " in message
    assert "start the job once" not in message
    assert "job model v1 from `samza-expand init-job" in message and "docs/operations.md" in message


def test_a_single_version_404_does_not_ask_for_two(tmp_path):
    from airflow_samza_expand.airflow._ui.app import check_versions

    _store(tmp_path, grown=False)
    snap = read_job(_settings(tmp_path), JOB)
    with pytest.raises(UiProblem) as problem:
        check_versions(snap, 1, 2)
    assert "pick two" not in problem.value.message and "(it has v1)" in problem.value.message
    with pytest.raises(UiProblem) as problem:
        check_versions(snap, 5)
    assert "pick two" not in problem.value.message


def _record(store: FileCoordinatorStore, results: dict) -> None:
    v1 = store.latest_job_model()
    assert v1 is not None
    record = planned_record(v1, {"orders": 4})
    for step, result in results.items():
        record = record.with_result(step, result)
    store.put_expansion(record, expected_revision=0)


def test_the_log_is_the_current_launchs_under_a_warm_handover(tmp_path):
    store = _store(tmp_path / "store", grown=False)
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in ("standby-1", "standby-2"):
        (logs / f"{name}.log").write_text(f"log of {name}\n")
    launch = {"detached": True, "pid": 1, "pgid": 1}
    _record(
        store,
        {
            "submit": {"launched": False, "reason": "a standby of v2 is warm"},
            "standby": {
                "launches": [
                    {
                        **launch,
                        "log_path": str(logs / "standby-1.log"),
                        "started_at": "2026-01-01T00:00:01Z",
                    },
                    {
                        **launch,
                        "log_path": str(logs / "standby-2.log"),
                        "started_at": "2026-01-01T00:00:02Z",
                    },
                ]
            },
        },
    )

    page, doc = _page_and_json(tmp_path / "store", logs)

    assert "No detached launch recorded" not in page
    assert "log of standby-2" in page and json.loads(doc)["log"]["path"].endswith("standby-2.log")
