"""Fixtures of the UI tests: a real expansion on the test Kafka, and a real api-server with the
provider's plugin (temporary Airflow home, SQLite, simple auth manager), bound to 127.0.0.1 on a
free port and stopped by its pid (process group) at the end of the session.

The expansion is written by the public operators run as a DAG with ``dag.test()``
(plan -> expand -> barrier -> stop -> write -> report), not by Spark: the job's part is played
by the test (it commits the consumer group's offsets, heartbeats as processors, and a stand-in
``python`` process launched with ``_protocol.job.launch.launch`` writes the restarted job's
log, whose handle is recorded in the expansion record as the submit step records it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import airflow_env  # noqa: E402, I001 - sets AIRFLOW_HOME before anything imports airflow
from browser import Browser, chromium_binary  # noqa: E402
from ui_helpers import free_port, http  # noqa: E402, F401

PASSWORD = "ui-test-" + uuid.uuid4().hex[:12]


@pytest.fixture(scope="session")
def ui_output(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the UI tests leave screenshots: ``$UI_SCREENSHOTS_DIR`` if set, else a directory
    under pytest's base temp directory (pytest keeps only the last few of those)."""
    named = os.environ.get("UI_SCREENSHOTS_DIR")
    if named:
        Path(named).mkdir(parents=True, exist_ok=True)
        return Path(named)
    return tmp_path_factory.mktemp("ui-screenshots")


@pytest.fixture(scope="session")
def ui_kafka(kafka_bootstrap: str) -> Iterator[dict[str, str]]:
    """``kafka_default`` pointing at the test Kafka, in this process and the api-server."""
    from airflow_samza_expand._kafka.config import client_config

    old = os.environ.get("AIRFLOW_CONN_KAFKA_DEFAULT")
    os.environ["AIRFLOW_CONN_KAFKA_DEFAULT"] = airflow_env.kafka_connection_env(kafka_bootstrap)
    yield client_config(kafka_bootstrap)
    if old is None:
        os.environ.pop("AIRFLOW_CONN_KAFKA_DEFAULT", None)
    else:
        os.environ["AIRFLOW_CONN_KAFKA_DEFAULT"] = old


class _LiveProcessor:
    """A processor that heartbeats ``running`` every few seconds until closed, as a live one
    does: a session fixture's single heartbeat would age past the TTL (30 s) while the
    api-server starts, and the pages would rightly call the processor dead."""

    def __init__(self, config: dict[str, str], job: str, processor_id: str, version: int):
        from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

        self._store = KafkaCoordinatorStore(config, job)
        self._beat = lambda: self._store.heartbeat(processor_id, version, "running")
        self._beat()  # alive before the fixture returns
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{job}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(5.0):
            self._beat()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._store.close()


@pytest.fixture(scope="session")
def expanded_job(ui_kafka: dict[str, str], tmp_path_factory: pytest.TempPathFactory):
    """A job whose input topic grew 2 -> 4 through the expansion DAG; processors heartbeat."""
    from datetime import datetime

    from airflow.sdk import DAG
    from kafka_helpers import commit_offsets, produce_keyed

    from airflow_samza_expand._kafka.admin import KafkaAdmin
    from airflow_samza_expand._protocol.job import launch as detached
    from airflow_samza_expand.airflow.operators import (
        ExpandPartitionsOperator,
        PlanExpansionOperator,
        StopStatefulJobOperator,
        WriteJobModelOperator,
    )
    from airflow_samza_expand.airflow.operators._report import ExpansionReportOperator
    from airflow_samza_expand.airflow.sensors import OrderingBarrierSensor
    from airflow_samza_expand.core.model import JobModel
    from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

    suffix = uuid.uuid4().hex[:8]
    job, topic = f"ui-job-{suffix}", f"ui-orders-{suffix}"
    admin = KafkaAdmin(ui_kafka, timeout_s=15)
    store = KafkaCoordinatorStore(ui_kafka, job)
    admin.ensure_topic(topic, 2)
    store.write_job_model(JobModel.initial(job, {topic: 2}, created_by="ui-test-job"))
    produce_keyed(ui_kafka, topic, 60)
    highs = admin.high_watermarks({topic: [0, 1]})[topic]
    commit_offsets(ui_kafka, job, topic, highs)  # the job processed everything so far
    store.heartbeat("processor-v1", 1, "stopped")

    eid = "{{ ti.xcom_pull(task_ids='plan')['expansion_id'] }}"
    with DAG(dag_id=f"ui_expansion_{suffix}", schedule=None, start_date=datetime(2026, 1, 1)):
        plan = PlanExpansionOperator(task_id="plan", job_name=job, targets={topic: 4})
        expand = ExpandPartitionsOperator(
            task_id="expand", topic=topic, factor=2, job_name=job, expansion_id=eid
        )
        barrier = OrderingBarrierSensor(
            task_id="barrier",
            job_name=job,
            expansion_id=eid,
            producer_refresh_grace_s=0,
            deferrable=False,
            poke_interval=1,
            mode="poke",
        )
        stop = StopStatefulJobOperator(task_id="stop", job_name=job, expansion_id=eid)
        write = WriteJobModelOperator(task_id="write", job_name=job, expansion_id=eid)
        report = ExpansionReportOperator(
            task_id="report",
            job_name=job,
            expansion_id=eid,
            run_mode="continuous",
            task_ids={"plan": "plan", "write": "write"},
            coordinator="kafka",
            kafka_config_id="kafka_default",
        )
        plan >> expand >> barrier >> stop >> write >> report
    dag = plan.dag
    run = airflow_env.run_dag_test(dag)
    states = airflow_env.task_states(run)
    assert set(states.values()) == {"success"}, states
    expansion_id = airflow_env.task_instance_xcom(run, "plan")["expansion_id"]

    # the restarted job: a stand-in process writes the log, its handle recorded as submit does
    log_dir = tmp_path_factory.mktemp("samza-expand-logs")
    log_path = str(log_dir / "spark-submit-ui-test.log")
    lines = "; ".join(f"print('restarted job: batch {i} committed', flush=True)" for i in range(5))
    handle = detached.launch([sys.executable, "-c", lines], log_path=log_path)
    _record_submit(store, expansion_id, {"detached": True, **handle})
    _wait_exit(detached, handle)
    store.close()
    admin.close()
    live = _LiveProcessor(ui_kafka, job, "processor-v2", 2)
    yield SimpleNamespace(
        job=job,
        topic=topic,
        expansion_id=expansion_id,
        dag_id=dag.dag_id,
        run_id=run.run_id,
        log_dir=str(log_dir),
        log_path=log_path,
    )
    live.close()


@pytest.fixture(scope="session")
def waiting_job(ui_kafka: dict[str, str]):
    """A job mid-expansion in the typed store: its barrier snapshot taken, the group behind it,
    the expansion lease held by a DAG run (written with the store's typed API)."""
    from kafka_helpers import commit_offsets, produce_keyed

    from airflow_samza_expand._kafka.admin import KafkaAdmin
    from airflow_samza_expand.core._clock import now_iso
    from airflow_samza_expand.core._plan import plan_expansion
    from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus
    from airflow_samza_expand.core.model import JobModel
    from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

    suffix = uuid.uuid4().hex[:8]
    job, topic = f"ui-waiting-{suffix}", f"ui-events-{suffix}"
    holder = f"airflow:samza_expand/manual__{suffix}"
    with KafkaAdmin(ui_kafka, timeout_s=15) as admin, KafkaCoordinatorStore(ui_kafka, job) as store:
        admin.ensure_topic(topic, 2)
        model = store.write_job_model(JobModel.initial(job, {topic: 2}))
        produce_keyed(ui_kafka, topic, 40)
        admin.create_partitions(topic, 4)
        highs = admin.high_watermarks({topic: [0, 1]})[topic]
        commit_offsets(ui_kafka, job, topic, {0: highs[0], 1: highs[1] - 7})  # 7 behind on 1
        store.acquire_lease("expansion", holder, ttl_s=600)
        plan = plan_expansion(model, {topic: 4}, {topic: 4})
        stamp = now_iso()
        record = ExpansionRecord(
            expansion_id=f"{job}~{topic}.2-4",
            job_name=job,
            base_version=1,
            target_version=2,
            plan=plan.to_dict(),
            status=ExpansionStatus.PLANNED,
            owner=holder,
            created_at=stamp,
            updated_at=stamp,
        ).with_step("plan", started_at=stamp, ended_at=now_iso())
        stored = store.put_expansion(record, expected_revision=0)
        expanded = store.put_expansion(
            stored.advance(ExpansionStatus.EXPANDED).with_step(
                "expand", started_at=now_iso(), ended_at=now_iso()
            ),
            expected_revision=stored.revision,
        )
        waiting = expanded.advance(
            ExpansionStatus.BARRIER_SNAPSHOT, barrier={topic: dict(highs)}
        ).with_step("barrier", started_at=now_iso())
        store.put_expansion(waiting, expected_revision=expanded.revision)
    live = _LiveProcessor(ui_kafka, job, "processor-a", 1)
    yield SimpleNamespace(job=job, topic=topic, holder=holder, expansion_id=record.expansion_id)
    live.close()


def _record_submit(store, expansion_id: str, handle: dict) -> None:
    """Record the launch handle as the submit step does: a typed record's ``submit`` result, or
    the ``submit`` field of a legacy dict document (operators before the typed record)."""
    from airflow_samza_expand.core.errors import CorruptCoordinatorRecordError

    try:
        record = store.get_expansion(expansion_id)
    except CorruptCoordinatorRecordError:
        record = None
    if record is not None:
        store.put_expansion(record.with_result("submit", handle), expected_revision=record.revision)
        return
    doc = store.get_expansion_doc(expansion_id)
    store.put_expansion_doc(expansion_id, {**doc, "submit": handle})


def _wait_exit(detached, handle) -> None:
    deadline = time.monotonic() + 60
    while detached.exit_code(handle) is None:
        assert time.monotonic() < deadline, "the stand-in job did not exit"
        time.sleep(0.1)


@pytest.fixture(scope="session")
def api_server(expanded_job, ui_kafka, tmp_path_factory: pytest.TempPathFactory):
    """A real ``airflow api-server`` with the plugin, on 127.0.0.1; yields its base URL."""
    home = airflow_env.migrate_airflow_db()
    passwords = home / "ui-passwords.json"
    passwords.write_text(json.dumps({"admin": PASSWORD}))
    port = free_port()
    log_path = tmp_path_factory.mktemp("api-server") / "api-server.log"
    env = {
        **os.environ,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__SAMZA_EXPAND__UI_JOBS": expanded_job.job,
        "AIRFLOW__SAMZA_EXPAND__UI_LOG_DIRS": expanded_job.log_dir,
    }
    airflow_cli = Path(sys.executable).with_name("airflow")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(airflow_cli), "api-server", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its workers share its process group: stopped together
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, f"api-server exited: {log_path.read_text()[-3000:]}"
            try:
                if http("GET", f"{base}/api/v2/monitor/health")[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"api-server not up: {log_path.read_text()[-3000:]}"
            time.sleep(0.5)
        yield SimpleNamespace(base=base, pid=proc.pid, log_path=log_path, env=env)
    finally:
        with_group = proc.pid
        try:
            os.killpg(with_group, signal.SIGTERM)
            proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(with_group, signal.SIGKILL)
            proc.wait(timeout=30)


@pytest.fixture(scope="session")
def token(api_server) -> str:
    """A JWT of the admin user from the simple auth manager's ``POST /auth/token``."""
    status, body = http(
        "POST",
        f"{api_server.base}/auth/token",
        body={"username": "admin", "password": PASSWORD},
    )
    assert status == 201, body
    return json.loads(body)["access_token"]


@pytest.fixture(scope="module")
def browser(api_server, token) -> Iterator[Browser]:
    """Headless Chromium signed in to the api-server (one per test module)."""
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no Chromium: run scripts/setup.sh as root (apt-get install chromium)")
    with Browser(binary) as chromium:
        chromium.set_cookie(api_server.base, "_token", token)  # the UI's session cookie
        yield chromium
