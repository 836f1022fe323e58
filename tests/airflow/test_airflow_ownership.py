"""One owner per expansion (docs/design.md 'Ownership, leases and fencing'), through real Airflow
(``dag.test()``) on real Kafka: runs released together launch the job once, a rerun finds its own
work, a dry run writes nothing, the event-driven DAG never turns a safe outcome red, and no secret
spark_conf value lands in an XCom, a coordinator record, a log or a file.

The job is `fake_spark_submit.py` standing in for ``spark-submit`` (tests/e2e run the real one).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import airflow_env
import pytest
from airflow.sdk import DAG
from airflow_env import task_instance_xcom, task_states
from confluent_kafka import Consumer, TopicPartition
from race_dags import build

from airflow_samza_expand.airflow.operators import (
    ExpandPartitionsOperator,
    PlanExpansionOperator,
    StopStatefulJobOperator,
    WriteJobModelOperator,
)
from airflow_samza_expand.airflow.sensors import OrderingBarrierSensor

pytestmark = pytest.mark.kafka

HERE = Path(__file__).resolve().parent
SECRET = "S3CR3T-do-not-leak-4711"


@pytest.fixture
def fake_spark(tmp_path, monkeypatch, kafka_conn):
    """``spark-submit`` on PATH = the fake job; ``spark_default`` = local master."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "spark-submit"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} {HERE / "fake_spark_submit.py"} "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    launches = tmp_path / "launches.jsonl"
    launches.touch()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SPARK_LAUNCHES", str(launches))
    monkeypatch.setenv("FAKE_SPARK_RUN_S", "90")
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local"})
    )
    yield launches
    for line in launches.read_text().splitlines():  # the fake jobs this test launched
        with contextlib.suppress(ProcessLookupError):
            os.kill(json.loads(line)["pid"], signal.SIGTERM)


def _launches(path: Path) -> list[list[str]]:
    return [json.loads(line)["argv"] for line in path.read_text().splitlines() if line]


def _spec(j, tmp_path, kafka_bootstrap, dag_id, **extra):
    return {
        "dag_id": dag_id,
        "job_name": j.name,
        "topic": j.topic,
        "bootstrap": kafka_bootstrap,
        "log_dir": str(tmp_path / "logs"),
        **extra,
    }


def _start(dag_spec: dict, logical_date: str, go: Path) -> subprocess.Popen:
    ready = go.with_name(f"ready-{dag_spec['dag_id']}-{logical_date[:10]}")
    spec = {"dag": dag_spec, "logical_date": logical_date, "go": str(go), "ready": str(ready)}
    return subprocess.Popen(
        [sys.executable, str(HERE / "dag_runner.py"), json.dumps(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=400)
    Path(proc.args[-1] and json.loads(proc.args[-1])["go"]).with_name(
        f"run-{proc.pid}.log"
    ).write_text(out + err)  # the run's log, kept beside the test's files
    assert proc.returncode == 0, err[-4000:]
    return json.loads(out.strip().splitlines()[-1])


def _xcom(dag_id: str, run_id: str, task_id: str, key: str = "return_value"):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = (
            session.query(XComModel)
            .filter_by(dag_id=dag_id, run_id=run_id, task_id=task_id, key=key)
            .one_or_none()
        )
        return None if row is None else XComModel.deserialize_value(row)


def _wait_for(condition, what: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@pytest.mark.parametrize("second", ["same-dag", "other-dag"])
def test_two_whole_dag_runs_released_together_launch_the_job_once(
    job, admin, fake_spark, tmp_path, kafka_bootstrap, second
):
    j = job(2)
    first = _spec(j, tmp_path, kafka_bootstrap, f"own_a_{j.name}")
    other = first if second == "same-dag" else {**first, "dag_id": f"own_b_{j.name}"}
    airflow_env.serialize_dag_to_db(build(**first))
    if other is not first:
        airflow_env.serialize_dag_to_db(build(**other))
    go = tmp_path / "go"
    procs = [
        _start(first, "2026-01-01T00:00:00+00:00", go),
        _start(other, "2026-01-02T00:00:00+00:00", go),
    ]
    _wait_for(lambda: len(list(tmp_path.glob("ready-*"))) == 2, "both runs to be ready")
    go.touch()
    results = [_finish(p) for p in procs]

    assert len(_launches(fake_spark)) == 1, _launches(fake_spark)
    j.store.refresh()
    assert [m.version for m in j.store.job_model_history()] == [1, 2]
    assert admin.partition_counts([j.topic]) == {j.topic: 4}
    assert all(r["state"] == "success" for r in results), results
    winners = [r for r in results if r["tasks"]["plan"] == "success"]
    losers = [r for r in results if r["tasks"]["plan"] == "skipped"]
    assert len(winners) == 1 and len(losers) == 1, results
    assert set(winners[0]["tasks"].values()) == {"success"}, winners[0]
    specs = {r["run_id"]: spec for r, spec in zip(results, (first, other), strict=True)}
    win_dag = specs[winners[0]["run_id"]]["dag_id"]
    lose_dag = specs[losers[0]["run_id"]]["dag_id"]
    plan = _xcom(win_dag, winners[0]["run_id"], "plan")
    joined = _xcom(lose_dag, losers[0]["run_id"], "plan", key="joined")
    assert joined["holder"] == f"airflow:{win_dag}/{winners[0]['run_id']}"
    assert joined["expansion_id"] == plan["expansion_id"]


def _operators_dag(j) -> DAG:
    expansion_id = "{{ ti.xcom_pull(task_ids='plan')['expansion_id'] }}"
    with DAG(dag_id=f"ops_{j.name}", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        plan = PlanExpansionOperator(
            task_id="plan", job_name=j.name, topics=[j.topic], check_partitioner=False
        )
        expand = ExpandPartitionsOperator(
            task_id="expand",
            topic=j.topic,
            target_partitions="{{ ti.xcom_pull(task_ids='plan')['plan']['counts_after']['"
            + j.topic
            + "'] }}",
            job_name=j.name,
            expansion_id=expansion_id,
        )
        # the record's order: the barrier and the stop come before the write (a write after
        # the expand alone is refused before it writes anything)
        barrier = OrderingBarrierSensor(
            task_id="barrier", job_name=j.name, expansion_id=expansion_id,
            producer_refresh_grace_s=0, stale_quiet_s=0, poke_interval=0.2, deferrable=False,
        )  # fmt: skip
        stop = StopStatefulJobOperator(
            task_id="stop", job_name=j.name, expansion_id=expansion_id, poll_interval_s=0.2
        )
        write = WriteJobModelOperator(task_id="write", job_name=j.name, expansion_id=expansion_id)
        plan >> expand >> barrier >> stop >> write
    return dag


def test_public_operators_rerun_after_a_completed_expansion_change_nothing(job, admin, run_dag):
    j = job(2)
    dag = _operators_dag(j)
    when = datetime.fromisoformat("2026-01-01T00:00:00+00:00")
    first = run_dag(dag, logical_date=when, run_after=when)
    assert set(task_states(first).values()) == {"success"}
    assert admin.partition_counts([j.topic]) == {j.topic: 4}

    again = run_dag(dag, logical_date=when, run_after=when)  # the same run id: a rerun
    assert again.run_id == first.run_id
    assert set(task_states(again).values()) == {"success"}, task_states(again)
    assert admin.partition_counts([j.topic]) == {j.topic: 4}  # not grown twice
    j.store.refresh()
    assert [m.version for m in j.store.job_model_history()] == [1, 2]
    assert task_instance_xcom(again, "expand")["changed"] is False
    assert task_instance_xcom(again, "write")["written"] is False


def test_a_write_right_after_the_expand_is_refused_and_writes_nothing(job, admin, run_dag):
    """The public operators chained without the barrier and the stop: the write step cannot
    move the record to job-model-written, so it refuses before writing v2 (the old main wrote
    v2 and left the record at ``expanded``, green)."""
    j = job(2)
    with DAG(dag_id=f"short_{j.name}", schedule=None, start_date=datetime(2026, 1, 1)) as short:
        expansion_id = "{{ ti.xcom_pull(task_ids='plan')['expansion_id'] }}"
        plan = PlanExpansionOperator(
            task_id="plan", job_name=j.name, topics=[j.topic], check_partitioner=False
        )
        expand = ExpandPartitionsOperator(
            task_id="expand", topic=j.topic, factor=2, job_name=j.name, expansion_id=expansion_id
        )
        write = WriteJobModelOperator(task_id="write", job_name=j.name, expansion_id=expansion_id)
        plan >> expand >> write
    run = run_dag(short)
    assert task_states(run) == {"plan": "success", "expand": "success", "write": "failed"}
    j.store.refresh()
    assert [m.version for m in j.store.job_model_history()] == [1]  # nothing written
    (record,) = j.store.expansions()
    assert record.status.value == "expanded"


def test_dry_run_writes_nothing(job, admin, fake_spark, tmp_path, kafka_bootstrap, run_dag):
    j = job(2)
    run = run_dag(build(**_spec(j, tmp_path, kafka_bootstrap, f"dry_{j.name}", dry_run=True)))
    assert str(run.state) == "success"
    assert task_states(run)["expand"] == "skipped"
    assert task_instance_xcom(run, "report")["dry_run"] is True
    assert admin.partition_counts([j.topic]) == {j.topic: 2}
    j.store.refresh()
    assert [m.version for m in j.store.job_model_history()] == [1]
    assert _coordinator_values(j) and not any(
        '"type": "expansion"' in key or '"type":"expansion"' in key
        for key, _ in _coordinator_values(j)
    ), "a dry run wrote an expansion record"
    assert _launches(fake_spark) == []


def _coordinator_values(j) -> list[tuple[str, str]]:
    """Every (key, value) ever written to the job's coordinator topic (the whole log)."""
    topic = f"__samza_coordinator_{j.name}"
    consumer = Consumer({**j.config, "group.id": f"probe-{j.name}", "enable.auto.commit": "false"})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=15)
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[str, str]] = []
        deadline = time.monotonic() + 60
        while len(out) < high and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            out.append(((msg.key() or b"").decode(), (msg.value() or b"").decode()))
        return out
    finally:
        consumer.close()


def test_event_driven_dag_ends_green_on_a_spurious_event_and_after_a_manual_expansion(
    job, admin, fake_spark, tmp_path, kafka_bootstrap, run_dag
):
    j = job(2)
    watcher = build(
        **_spec(
            j, tmp_path, kafka_bootstrap, f"watch_{j.name}", growth={"follow_live_counts": True}
        )
    )
    spurious = run_dag(watcher, logical_date=datetime.fromisoformat("2026-01-01T00:00:00+00:00"))
    assert str(spurious.state) == "success", task_states(spurious)
    assert "failed" not in task_states(spurious).values()

    manual = run_dag(build(**_spec(j, tmp_path, kafka_bootstrap, f"manual_{j.name}")))
    assert set(task_states(manual).values()) == {"success"}, task_states(manual)
    after = run_dag(watcher, logical_date=datetime.fromisoformat("2026-01-02T00:00:00+00:00"))
    assert str(after.state) == "success", task_states(after)
    assert "failed" not in task_states(after).values()
    assert len(_launches(fake_spark)) == 1
    j.store.refresh()
    assert [m.version for m in j.store.job_model_history()] == [1, 2]


def test_watcher_overlapping_a_manual_expansion_waits_and_ends_skipped(
    job, admin, fake_spark, tmp_path, kafka_bootstrap
):
    j = job(2)
    manual = _spec(j, tmp_path, kafka_bootstrap, f"manual_{j.name}")
    watcher = _spec(j, tmp_path, kafka_bootstrap, f"watch_{j.name}",
                    growth={"follow_live_counts": True})  # fmt: skip
    airflow_env.serialize_dag_to_db(build(**manual))
    airflow_env.serialize_dag_to_db(build(**watcher))
    go = tmp_path / "go"
    go.touch()
    manual_run = _start(manual, "2026-01-01T00:00:00+00:00", go)
    _wait_for(lambda: admin.partition_counts([j.topic])[j.topic] == 4, "the manual expansion")
    watcher_run = _start(watcher, "2026-01-01T00:00:00+00:00", go)  # the asset event
    results = [_finish(manual_run), _finish(watcher_run)]
    assert [r["state"] for r in results] == ["success", "success"], results
    assert "failed" not in results[1]["tasks"].values(), results[1]
    assert len(_launches(fake_spark)) == 1
    j.store.refresh()
    assert [m.version for m in j.store.job_model_history()] == [1, 2]


def test_masked_spark_conf_values_land_nowhere(
    job, fake_spark, tmp_path, kafka_bootstrap, run_dag, airflow_home
):
    j = job(2)
    conf = {"spark.hadoop.fs.s3a.secret.key": SECRET, "spark.executor.memory": "1g"}
    run = run_dag(build(**_spec(j, tmp_path, kafka_bootstrap, f"sec_{j.name}", spark_conf=conf)))
    assert set(task_states(run).values()) == {"success"}, task_states(run)
    launched = _launches(fake_spark)
    assert len(launched) == 1 and f"spark.hadoop.fs.s3a.secret.key={SECRET}" in launched[0]

    db = sqlite3.connect(str(Path(airflow_home) / "airflow.db"))  # reads the WAL too
    try:
        rows = db.execute(
            "SELECT task_id, key, CAST(value AS TEXT) FROM xcom WHERE dag_id = ?", (run.dag_id,)
        ).fetchall()
    finally:
        db.close()
    assert rows, "no XComs found"
    assert [r[:2] for r in rows if SECRET in (r[2] or "")] == []
    assert [k for k, v in _coordinator_values(j) if SECRET in v] == []
    leaks = [
        str(p)
        for root in (Path(airflow_home) / "logs", tmp_path / "logs")
        if root.exists()
        for p in root.rglob("*")
        if p.is_file() and SECRET in p.read_text(errors="replace")
    ]
    assert leaks == []
