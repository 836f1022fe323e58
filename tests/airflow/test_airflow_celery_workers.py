"""The expansion DAG on Airflow's CeleryExecutor with two workers that share nothing but the
metadata database (through the api-server), the Celery broker and Kafka - each its own temp
directory, HOME and launch host name (`_testing.celery_workers`) - and the worker of the
submit task killed mid-step, so that its retry runs on the other worker:

the factory DAG expands the job with a cold restart (stop, write, launch); the submit task
notes its launch in the expansion record and starts it; while the launched job is still
starting (no heartbeat yet: its "JVM" waits for a gate), the worker running the task is
SIGKILLed with everything it started (the launch is detached: it lives on). The scheduler fails
the silent task and retries it on the other worker, which finds the launch in the record and
waits for it instead of launching a second copy (by the old local-pid rule it launched again at
once); once the job heartbeats v2, the retry ends without a launch. The run ends success, one
launch of v2, at most one live processor at every sample, the record completed.

The job is `fake_spark_submit.py` (no Spark): this proves the decision across workers.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import sys
import time
from pathlib import Path

import airflow_env
import pytest

from airflow_samza_expand._testing.airflow_services import AirflowServices
from airflow_samza_expand._testing.celery_workers import celery_env, start_worker
from airflow_samza_expand.core._liveness import acknowledging, is_alive

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(900)]
HERE = Path(__file__).resolve().parent
WORKERS = ("worker-a", "worker-b")
DAG_FILE = """\
import json
from datetime import timedelta

from airflow_samza_expand.dags import RestartSettings, build_expansion_dag, stream_job_args

SPEC = json.loads({spec!r})
dag = build_expansion_dag(
    SPEC["dag_id"],
    job_name=SPEC["job_name"],
    topics=[SPEC["topic"]],
    application_args=stream_job_args(
        job_name=SPEC["job_name"],
        bootstrap_servers=SPEC["bootstrap"],
        checkpoint_dir="checkpoint",
        output_topic=SPEC["topic"] + "-out",
    ),
    restart=RestartSettings(handover="cold", stop_timeout_s=120.0, ack_timeout_s=300.0),
    # the start-up check outlasts the kill: the worker dies while the submit step runs
    spark_submit_kwargs={{"startup_check_s": 120.0}},
    producer_refresh_grace_s=1.0,
    barrier_timeout_s=300.0,
    poll_interval_s=0.5,
    check_partitioner=False,
    retries=2,
    retry_delay=timedelta(seconds=1),
)
"""
# spark-submit as the workers run it: notes the spawn, then "starts the JVM" until the gate
# file exists (no heartbeat meanwhile), then plays the job (fake_spark_submit.py)
SPARK_SUBMIT = """#!/bin/sh
echo "$$ $*" >> {spawns}
while [ ! -e {gate} ]; do sleep 0.2; done
exec {python} {fake} "$@"
"""


def test_a_submit_retried_on_another_worker_waits_for_the_launch_instead_of_launching_twice(
    job, admin, kafka_bootstrap, tmp_path
):
    started = time.monotonic()
    j = job(2)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    spawns, gate, launches = tmp_path / "spawns.txt", tmp_path / "jvm-started", tmp_path / "l.jsonl"
    spawns.touch()
    launches.touch()
    script = bin_dir / "spark-submit"
    script.write_text(SPARK_SUBMIT.format(spawns=spawns, gate=gate, python=sys.executable,
                                          fake=HERE / "fake_spark_submit.py"))  # fmt: skip
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    fake = {"FAKE_SPARK_LAUNCHES": str(launches), "FAKE_SPARK_RUN_S": "300"}
    home = tmp_path / "airflow"
    env = {
        **fake,
        **celery_env(home),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "AIRFLOW_CONN_KAFKA_DEFAULT": airflow_env.kafka_connection_env(kafka_bootstrap),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local"}),
    }
    dag_id = f"celery_{j.name.replace('-', '_')}"
    spec = {"dag_id": dag_id, "job_name": j.name, "topic": j.topic, "bootstrap": kafka_bootstrap}
    samples: list[int] = []  # live processors of the job at each look (one instance at a time)

    def look():
        j.store.refresh()
        beats = j.store.processors()
        samples.append(
            sum(1 for p in beats.values() if p.get("state") == "running" and is_alive(p))
        )
        record = (j.store.expansions() or [None])[0]
        return record, beats

    v1 = _start_v1(j, kafka_bootstrap, fake, tmp_path)
    try:
        with AirflowServices.start(home, env=env) as af:
            for name in WORKERS:
                start_worker(af, name, tmp_path / name)
            (af.dags_folder / f"{dag_id}.py").write_text(DAG_FILE.format(spec=json.dumps(spec)))
            af.wait_dag(dag_id)
            up = time.monotonic() - started
            run_id = af.trigger(dag_id)

            def launched():
                record, _ = look()
                facts = (record.results.get("launch") if record else None) or {}
                return facts if facts and spawns.read_text().strip() else None

            facts = af.wait(launched, "the submit step to launch the job", 300)
            first = facts["host"]
            assert first in WORKERS, facts
            # noted before the start: the log path, in the launching worker's own temp dir
            assert facts["log_path"].startswith(str(tmp_path / first / "tmp")), facts
            af.kill(first)  # SIGKILL of the worker and its task, mid-step
            killed_at = time.monotonic()
            other = next(w for w in WORKERS if w != first)
            retry = af.wait_ti(dag_id, run_id, "submit", "running",
                               until=lambda ti: ti["try_number"] == 2, timeout_s=180)  # fmt: skip
            waiting = af.wait(lambda: _said(home, dag_id, "not launching job"),
                              "the retry to wait for the recorded launch", 120)  # fmt: skip
            assert f"launch {facts['launch_id']} on host {first}" in waiting, waiting
            gate.touch()  # the launched job's JVM is up: it heartbeats v2

            def ended():
                look()
                status, run = af.api("GET", f"dags/{dag_id}/dagRuns/{run_id}")
                found = run.get("state") if status == 200 else None
                return found if found in ("success", "failed") else None

            state = af.wait(ended, "the run to end", 600)
            tis = af.task_instances(dag_id, run_id)
            figures = (f"services+workers up {up:.0f} s, kill to retry running "
                       f"{time.monotonic() - killed_at:.0f} s")  # fmt: skip
    finally:
        gate.touch()
        _stop_fakes(launches, v1)
    assert state == "success", {t: ti["state"] for t, ti in tis.items()}
    assert tis["submit"]["try_number"] == 2 == retry["try_number"], tis["submit"]
    assert len(spawns.read_text().splitlines()) == 1  # launched once: the retry launched nothing
    record, beats = look()
    assert record.status == "completed", record
    assert record.results["launch"]["host"] == first and record.results["launch"]["attempt"] == 1
    assert acknowledging(beats, 2), beats
    assert max(samples) == 1, samples  # never two instances running at once
    assert admin.partition_counts([j.topic]) == {j.topic: 4}
    print(f"[celery] submit on {first} killed, retried on {other}: {figures}")


def _start_v1(j, bootstrap: str, fake: dict, cwd: Path):
    import subprocess

    args = ["--job-name", j.name, "--bootstrap-servers", bootstrap, "--coordinator", "kafka"]
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "fake_spark_submit.py"), *args],
        env={**os.environ, **fake}, cwd=cwd,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not acknowledging(j.store.processors(), 1):
        assert time.monotonic() < deadline, "v1 did not start"
        j.store.refresh()
        time.sleep(0.2)
    return proc


def _said(home: Path, dag_id: str, text: str) -> str | None:
    """The line of the submit task's second try's log that says ``text``, once it does."""
    for path in (home / "logs").glob(f"dag_id={dag_id}/*/task_id=submit/attempt=2.log"):
        for line in path.read_text(errors="replace").splitlines():
            if text in line:
                return line
    return None


def _stop_fakes(launches: Path, v1) -> None:
    for line in launches.read_text().splitlines():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(json.loads(line)["pid"], signal.SIGTERM)
    v1.terminate()
    v1.wait(60)
