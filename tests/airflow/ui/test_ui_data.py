"""The UI's reads (``airflow._ui.data``) on a file coordinator store: no Kafka, no server."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_samza_expand._protocol.records import expansion_id_for
from airflow_samza_expand.airflow._ui.data import UiProblem, read_job
from airflow_samza_expand.airflow._ui.settings import UiSettings
from airflow_samza_expand.core._plan import plan_expansion
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._files import FileCoordinatorStore

JOB = "orders-job"


def _settings(root: Path, *log_dirs: Path) -> UiSettings:
    return UiSettings(coordinator=str(root), discover=False, log_dirs=tuple(map(str, log_dirs)))


def _grown(root: Path) -> tuple[FileCoordinatorStore, str]:
    """Job models v1 (orders: 2) and v2 (orders: 4); returns the store and the expansion id."""
    store = FileCoordinatorStore(str(root), JOB)
    v1 = store.write_job_model(JobModel.initial(JOB, {"orders": 2}))
    store.write_job_model(plan_expansion(v1, {"orders": 2}, {"orders": 4}).new_job_model)
    return store, expansion_id_for(JOB, {"orders": 2}, {"orders": 4})


def test_unknown_job_is_a_404_problem(tmp_path):
    with pytest.raises(UiProblem) as problem:
        read_job(_settings(tmp_path), "no-such-job")
    assert problem.value.status == 404
    assert "'no-such-job' has no job model" in problem.value.message
    assert "no processor either" in problem.value.message
    assert "samza-expand init-job" in problem.value.message  # the plan step's words
    assert "JobModel.initial" not in problem.value.message


def test_impossible_job_name_is_a_400_problem(tmp_path):
    with pytest.raises(UiProblem) as problem:
        read_job(_settings(tmp_path), "bad/name")
    assert problem.value.status == 400 and "cannot name a Kafka topic" in problem.value.message


def test_a_corrupt_expansion_record_is_a_problem_line_and_the_rest_shows(tmp_path):
    store, expansion_id = _grown(tmp_path)
    store.put_expansion_doc(expansion_id, {"status": "expanded", "barrier": {"orders": "x"}})

    snap = read_job(_settings(tmp_path), JOB)

    assert [m.version for m in snap.history] == [1, 2]
    assert snap.expansions == []
    (problem,) = snap.problems
    assert expansion_id in problem and "fix or delete the record" in problem


def test_the_log_is_shown_only_under_an_allowed_directory(tmp_path):
    store, expansion_id = _grown(tmp_path / "store")
    allowed, elsewhere = tmp_path / "logs", tmp_path / "private"
    for folder in (allowed, elsewhere):
        folder.mkdir()
        (folder / "job.log").write_text(f"log in {folder.name}\n")
    for folder, shown in ((allowed, True), (elsewhere, False)):
        doc = {"status": "submitted", "submit": {"log_path": str(folder / "job.log")}}
        store.put_expansion_doc(expansion_id, doc)

        snap = read_job(_settings(tmp_path / "store", allowed), JOB)

        assert snap.log is not None and snap.log.path == str(folder / "job.log")
        assert ("log in logs" in snap.log.text) is shown
        assert ("private" in snap.log.text) is False
        assert ("outside [samza_expand] ui_log_dirs" in snap.log.note) is not shown


def test_provider_info_and_entry_point_name_the_same_plugin():
    import importlib.metadata

    from airflow.plugins_manager import AirflowPlugin

    from airflow_samza_expand.get_provider_info import get_provider_info

    (listed,) = get_provider_info()["plugins"]
    (entry,) = [
        ep
        for ep in importlib.metadata.entry_points(group="airflow.plugins")
        if ep.name == "samza_expand"
    ]
    plugin = entry.load()
    assert listed["plugin-class"] == f"{plugin.__module__}.{plugin.__qualname__}"
    assert issubclass(plugin, AirflowPlugin) and plugin.name == listed["name"]
    assert [app["url_prefix"] for app in plugin.fastapi_apps] == ["/samza-expand"]


SECRET = "hunter2-not-on-the-page"


@pytest.mark.parametrize(
    ("bootstrap", "extra", "title"),
    [
        ("127.0.0.1:9", {}, "Kafka is unreachable"),
        (
            None,  # the development broker, which speaks no SASL
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "svc",
                "sasl.password": SECRET,
            },
            "Kafka refused the credentials",
        ),
    ],
    ids=["unreachable", "authentication"],
)
def test_kafka_faults_are_named_without_secrets(monkeypatch, dev_broker, bootstrap, extra, title):
    import airflow_env

    conn = airflow_env.kafka_connection_env(bootstrap or dev_broker.bootstrap, **extra)
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_UI_FAULT", conn)
    settings = UiSettings(kafka_config_id="kafka_ui_fault", timeout_s=3)

    with pytest.raises(UiProblem) as problem:
        read_job(settings, JOB)

    assert (problem.value.status, problem.value.title) == (503, title)
    assert SECRET not in problem.value.message


def test_a_processor_reading_too_few_partitions_or_stale_placements_is_flagged(tmp_path):
    """The processors table names the partitions a processor's job model does not cover
    (a topic grown outside the expansion) and the stale placements its order check
    counted, from its heartbeat; in the page and in the JSON."""
    from airflow_samza_expand.airflow._ui.html import job_page
    from airflow_samza_expand.airflow._ui.views import snapshot_json

    store, _ = _grown(tmp_path)
    store.heartbeat("old", 1, "running", role="active", ttl_s=30, uncovered={"orders": [2, 3]})
    counts = {"records": 3, "keys": [["key-7", 2], ["key-9", 1]], "keys_truncated": False}
    store.heartbeat("new", 2, "running", role="active", ttl_s=30, stale_placements=counts)
    store.heartbeat("fine", 2, "standby", role="standby", ttl_s=30)

    snap = read_job(_settings(tmp_path), JOB)

    by_id = {p.processor_id: p for p in snap.processors}
    assert by_id["old"].uncovered == {"orders": [2, 3]} and by_id["old"].stale_placements is None
    assert by_id["new"].stale_placements == counts and by_id["new"].uncovered == {}
    assert by_id["fine"].warnings() == []
    assert by_id["old"].warnings() == ["does not read orders partitions [2, 3]"]
    assert by_id["new"].warnings() == ["order at risk: 3 stale placements, 2 keys (key-7, key-9)"]
    html = job_page(snap, "/samza-expand", "")
    assert "does not read orders partitions [2, 3]" in html
    assert "order at risk: 3 stale placements, 2 keys (key-7, key-9)" in html
    doc = {p["processor_id"]: p for p in snapshot_json(snap)["processors"]}
    assert doc["new"]["stale_placements"] == counts
    assert doc["old"]["uncovered"] == {"orders": [2, 3]}


def test_a_page_fetch_logs_no_connection_line(monkeypatch, caplog, capfd):
    """The job page fetches its content every few seconds: reading the Kafka connection for it
    writes no "Kafka connection ..." line to the api-server's log (the hook's client_config
    does, once per task, where it helps)."""
    import json
    import logging

    from airflow_samza_expand.airflow._ui.data import kafka_config

    extra = {"bootstrap.servers": "127.0.0.1:9"}
    conn = json.dumps({"conn_type": "kafka", "extra": extra})
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DEFAULT", conn)
    with caplog.at_level(logging.DEBUG):
        config = kafka_config(UiSettings())
    assert config["bootstrap.servers"] == "127.0.0.1:9"
    out, err = capfd.readouterr()  # the hook logs through structlog, to the process's output
    assert "Kafka connection" not in caplog.text + out + err, out + err


def test_processors_list_the_live_and_newest_first(tmp_path):
    """The running processor first, not last after the stopped ones sorted as text."""
    store, _ = _grown(tmp_path)
    for pid in ("processor-1", "processor-10", "processor-2"):
        store.heartbeat(pid, 1, "stopped", ttl_s=30)
    store.heartbeat("processor-9", 2, "running", role="active", ttl_s=30)
    snap = read_job(_settings(tmp_path), JOB)
    order = [p.processor_id for p in snap.processors]
    assert order == ["processor-9", "processor-1", "processor-2", "processor-10"]


def test_the_log_tail_starts_at_a_whole_line(tmp_path):
    from airflow_samza_expand.airflow._ui.parts import LOG_TAIL_CHARS

    store, expansion_id = _grown(tmp_path / "store")
    logs = tmp_path / "logs"
    logs.mkdir()
    lines = [f"line {i:05d} " + "x" * 50 for i in range(2 * LOG_TAIL_CHARS // 50)]
    (logs / "job.log").write_text("\n".join(lines) + "\n")
    store.put_expansion_doc(
        expansion_id, {"status": "submitted", "submit": {"log_path": str(logs / "job.log")}}
    )
    snap = read_job(_settings(tmp_path / "store", logs), JOB)
    assert snap.log is not None
    first = snap.log.text.splitlines()[0]
    assert first in lines, first  # not the end of a line cut in the middle
    assert snap.log.text.rstrip("\n").endswith(lines[-1])


def test_the_order_verdict_is_on_the_expansions_row(tmp_path):
    """The order verdict of docs/design.md 'Stale placements' ("order: proven" / "at risk",
    stale placements before and after the snapshot) on the page, as the report words it."""
    import dataclasses

    from ui_helpers import planned_record

    from airflow_samza_expand.airflow._ui.html import job_page
    from airflow_samza_expand.core._order import OrderEvidence

    store = FileCoordinatorStore(str(tmp_path), JOB)
    v1 = store.write_job_model(JobModel.initial(JOB, {"orders": 2}))
    evidence = OrderEvidence()  # scanned: no stale placement before or after the snapshot
    record = dataclasses.replace(
        planned_record(v1, {"orders": 4}), stale_placements=evidence.to_dict()
    )
    store.put_expansion(record, expected_revision=0)
    snap = read_job(_settings(tmp_path), JOB)
    (expansion,) = snap.expansions
    assert expansion.order is not None and expansion.order.startswith("order: proven"), expansion
    assert not expansion.order_at_risk
    assert f"<p class='ok'>{expansion.order}" in job_page(snap, "/samza-expand", "")
