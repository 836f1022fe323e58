"""An expansion under way on the job page and in its JSON, from records written in
several states to a file store: no Kafka, no Spark, no server."""

from __future__ import annotations

import json
from pathlib import Path

from ui_helpers import planned_record

from airflow_samza_expand.airflow._ui.data import read_job
from airflow_samza_expand.airflow._ui.html import job_page
from airflow_samza_expand.airflow._ui.settings import UiSettings
from airflow_samza_expand.airflow._ui.views import snapshot_json
from airflow_samza_expand.core._clock import now_iso
from airflow_samza_expand.core._record import ExpansionStatus
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._files import FileCoordinatorStore

JOB = "orders-job"
S = ExpansionStatus


def _read(root: Path) -> tuple[str, dict]:
    snap = read_job(UiSettings(coordinator=str(root), discover=False), JOB)
    return job_page(snap, "/samza-expand", ""), json.loads(json.dumps(snapshot_json(snap)))


def test_an_expansion_under_way_shows_its_step_grace_and_barrier(tmp_path):
    store = FileCoordinatorStore(str(tmp_path), JOB)
    v1 = store.write_job_model(JobModel.initial(JOB, {"orders": 2}))
    stamp = now_iso()
    record = store.put_expansion(
        planned_record(v1, {"orders": 4}).with_step("expand", started_at=stamp),
        expected_revision=0,
    )

    page, doc = _read(tmp_path)  # expanding
    assert (doc["running"]["step"], doc["running"]["doing"]) == ("expand", "running")
    assert doc["running"]["elapsed_s"] >= 0 and "Expansion under way" in page
    assert "http-equiv='refresh'" in page

    ended = now_iso()
    record = store.put_expansion(
        record.advance(S.EXPANDED).with_step("expand", started_at=stamp, ended_at=ended),
        expected_revision=record.revision,
    )
    page, doc = _read(tmp_path)  # the producer refresh grace
    assert doc["running"]["step"] == "barrier (grace and snapshot)"  # the DAG's task id
    assert doc["running"]["grace"]["started_at"] == ended
    assert "Producer refresh grace: running for" in page

    record = store.put_expansion(
        record.advance(S.BARRIER_SNAPSHOT, barrier={"orders": {0: 10, 1: 12}}).with_step(
            "barrier", started_at=now_iso()
        ),
        expected_revision=record.revision,
    )
    store.heartbeat("v2-standby", 2, "starting", role="standby", ttl_s=30)
    page, doc = _read(tmp_path)  # the barrier drains (no Kafka here: offsets, lag unknown)
    assert doc["running"]["new_processors"] == [
        {"processor_id": "v2-standby", "role": "standby", "state": "starting", "alive": True}
    ]
    assert "v2-standby (standby): starting - warming up" in page
    assert doc["running"]["step"] == "barrier (drain)" and doc["running"]["grace"] is None
    offsets = {(r["topic"], r["partition"]): r["barrier_offset"] for r in doc["running"]["barrier"]}
    assert offsets == {("orders", 0): 10, ("orders", 1): 12}
    assert "orders 1\t12" in page.replace("</td><td>", "\t")

    for status in (S.BARRIER_PASSED, S.JOB_STOPPED, S.JOB_MODEL_WRITTEN, S.COMPLETED):
        record = store.put_expansion(record.advance(status), expected_revision=record.revision)
    page, doc = _read(tmp_path)  # completed
    assert doc["running"] is None
    assert "Expansion under way" not in page and "<section id='running'" not in page


def test_the_standby_warming_up_and_the_current_launchs_log_show_while_it_runs(tmp_path):
    """Under a warm handover the standby step launched the new version: the running section
    names the launch, the standby's warm-up and the tail of that launch's log."""
    store = FileCoordinatorStore(str(tmp_path / "store"), JOB)
    v1 = store.write_job_model(JobModel.initial(JOB, {"orders": 2}))
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "standby-v2.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)) + "SparkSession ready\n")
    launch = {"pid": 4242, "log_path": str(log), "started_at": now_iso()}
    record = planned_record(v1, {"orders": 4})
    for status in (S.EXPANDED, S.BARRIER_SNAPSHOT, S.BARRIER_PASSED):
        record = record.advance(status)
    record = record.with_step("standby", started_at=now_iso(), ended_at=now_iso()).with_result(
        "standby", {"launches": [launch]}
    )
    store.put_expansion(record, expected_revision=0)
    store.heartbeat("v2-standby", 2, "starting", role="standby", ttl_s=30)
    snap = read_job(
        UiSettings(coordinator=str(tmp_path / "store"), discover=False, log_dirs=(str(logs),)), JOB
    )
    page = job_page(snap, "/samza-expand", "")
    doc = json.loads(json.dumps(snapshot_json(snap)))
    running = doc["running"]
    assert [(x["step"], x["pid"], x["log_path"]) for x in running["launches"]] == [
        ("submit_standby", 4242, str(log))
    ]
    assert running["log"]["path"] == str(log)
    assert running["log"]["tail"].splitlines()[-1] == "SparkSession ready"
    assert len(running["log"]["tail"].splitlines()) == 20  # the newest lines only
    section = page.split("<section id='running'")[1].split("</section>")[0]
    assert "Launched by step <b>submit_standby</b>" in section and "(pid 4242)" in section
    assert "v2-standby (standby): starting - warming up" in section
    assert "line 99\nSparkSession ready</pre>" in section and "line 79\n" not in section


def test_the_stop_step_waiting_for_the_standby_to_warm_up_says_so(tmp_path):
    """Under a warm handover the stop step first waits for the vN+1 standby to be warm: until
    then the running view says it waits for the warm-up, not that it stops the job (the live
    browser test saw "stopping the running job model version" while v1 still ran)."""
    store = FileCoordinatorStore(str(tmp_path), JOB)
    v1 = store.write_job_model(JobModel.initial(JOB, {"orders": 2}))
    record = planned_record(v1, {"orders": 4})
    for status in (S.EXPANDED, S.BARRIER_SNAPSHOT, S.BARRIER_PASSED):
        record = record.advance(status)
    record = record.with_step("standby", started_at=now_iso(), ended_at=now_iso())
    record = store.put_expansion(record, expected_revision=0)
    store.heartbeat("v1", 1, "running", ttl_s=30)
    store.heartbeat("v2-standby", 2, "starting", role="standby", ttl_s=30)

    page, doc = _read(tmp_path)
    waiting = "waiting for the new version's standby to warm up, then stopping the running version"
    assert (doc["running"]["step"], doc["running"]["doing"]) == ("stop_job", waiting)
    assert f"Step <b>stop_job</b> ({waiting})" in page.replace("&#x27;", "'")

    record = store.put_expansion(  # the stop step has begun: it waits for the warm-up first
        record.with_step("stop", started_at=now_iso()), expected_revision=record.revision
    )
    _, doc = _read(tmp_path)
    assert (doc["running"]["step"], doc["running"]["doing"]) == ("stop_job", waiting)

    store.heartbeat("v2-standby", 2, "standby", role="standby", ttl_s=30)  # warm now
    _, doc = _read(tmp_path)
    assert (doc["running"]["step"], doc["running"]["doing"]) == ("stop_job", "running")


def test_the_lag_chart_draws_from_its_first_sample():
    """One sample (the barrier's first poll) is a mark on the chart, not nothing."""
    from airflow_samza_expand.airflow._ui.running_html import lag_chart

    chart = lag_chart([{"at": now_iso(), "total": 12, "partitions": {"orders[1]": 12}}])
    assert chart.count("<circle") == 1 and "12 now" in chart


def test_the_barrier_says_what_it_waits_for():
    from airflow_samza_expand.airflow._ui.running_html import _barrier_wait

    rows = [
        {"topic": "orders", "partition": 0, "lag": 0},
        {"topic": "orders", "partition": 1, "lag": 7},
    ]
    assert "on 1 old partition: orders 1 (7); lag 7 in all" in _barrier_wait(rows)
    done = [{**r, "lag": 0} for r in rows]
    assert "the barrier step sees it at its next poll" in _barrier_wait(done)
    assert "at its next poll, in about 3 s, then" in _barrier_wait(done, 3.2)


def test_the_barrier_section_knows_when_its_step_polls_next():
    """The line "barrier (running)" seconds after the lag showed 0 says it waits for the next
    poll, and when: the last lag sample plus the median gap between samples."""
    from datetime import UTC, datetime, timedelta

    from airflow_samza_expand.airflow._ui.running import next_poll_in_s

    t0 = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
    samples = [{"at": (t0 + timedelta(seconds=s)).isoformat(), "total": 1} for s in (0, 10, 20)]
    assert next_poll_in_s(samples, t0 + timedelta(seconds=24)) == 6.0
    assert next_poll_in_s(samples, t0 + timedelta(seconds=40)) == 0.0  # due: any moment now
    assert next_poll_in_s(samples[:1], t0) is None
