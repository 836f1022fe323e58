"""The expansion DAG on Airflow's CeleryExecutor with two workers that share nothing but the
metadata database (through the api-server), the Celery broker and Kafka - each its own temp
directory, HOME and launch host name (`_testing.celery_workers`) - and the worker of a step
killed mid-step, so that its retry runs on the other worker. One set of services and workers
serves every case (a module fixture); a killed worker is started again for the next case.

* cold (the shipped job): the submit task notes its launch in the expansion record and starts
  it; while the launched job is still starting (no heartbeat yet: its "JVM" waits for a gate),
  the worker running the task is SIGKILLed with everything it started (the launch is detached:
  it lives on). The retry on the other worker finds the launch in the record and waits for it
  instead of launching a second copy; once the job heartbeats v2, it ends without a launch.
* warm (the shipped job): the same for the standby step - its retry waits for the standby the
  first try launched, and the submit step launches nothing (the standby takes over).
* in-app (a user's job on the runtime; the DAG names no application, Airflow launches
  nothing): the plan waits in its worker for the job, which is down; that worker is killed and
  the plan's retry on the other worker waits on, until the job is back; the job restarts its
  own query on v2.

Each run ends success, the record completed, at most one live processor running at every
sample, the topic grown. The job is `fake_spark_submit.py` (no Spark): these prove the
decisions across workers; the restarts' exactness with real Spark is the e2e tests' subject.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

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

from airflow_samza_expand.dags import (
    BarrierSettings, JobSettings, KafkaSettings, RestartSettings, SparkSettings,
    build_expansion_dag, stream_job_args,
)

SPEC = json.loads({spec!r})
if SPEC["shipped"]:
    args = stream_job_args(job_name=SPEC["job_name"], bootstrap_servers=SPEC["bootstrap"],
                           checkpoint_dir="checkpoint", output_topic=SPEC["topic"] + "-out")
    # the start-up check outlasts the kill: the worker dies while the launching step runs
    extra = {{"spark": SparkSettings(submit_kwargs={{"startup_check_s": 120.0}})}}
else:  # a user's job on the runtime: the DAG names no application and launches nothing
    args = ["--job-name", SPEC["job_name"], "--bootstrap-servers", SPEC["bootstrap"]]
    # the plan's wait for the job runs in its worker (not deferred): the worker can be lost
    extra = {{"default_args": {{"deferrable": False}}}}
dag = build_expansion_dag(
    SPEC["dag_id"],
    job=JobSettings(name=SPEC["job_name"], topics=[SPEC["topic"]], application_args=args),
    restart=RestartSettings(restart=SPEC["restart"], stop_timeout_s=120.0, ack_timeout_s=300.0,
                            job_down_timeout_s=300.0),
    barrier=BarrierSettings(producer_refresh_grace_s=1.0, barrier_timeout_s=300.0),
    kafka=KafkaSettings(check_partitioner=False),
    poll_interval_s=0.5,
    retries=2,
    retry_delay=timedelta(seconds=1),
    **extra,
)
"""
# spark-submit as the workers run it: notes the spawn, then "starts the JVM" until the job's
# gate file exists (no heartbeat meanwhile), then plays the job (fake_spark_submit.py)
SPARK_SUBMIT = """#!/bin/sh
job=""; prev=""
for a in "$@"; do [ "$prev" = "--job-name" ] && job="$a"; prev="$a"; done
echo "$$ $*" >> {root}/spawns-$job.txt
while [ ! -e {root}/gate-$job ]; do sleep 0.2; done
exec {python} {fake} "$@"
"""


@pytest.fixture(scope="module")
def celery(kafka_bootstrap, tmp_path_factory):
    """The services (CeleryExecutor, SQLite broker and backend) and both workers, for every
    case; ``spark-submit`` on their PATH is the gated fake above."""
    started = time.monotonic()
    root = tmp_path_factory.mktemp("celery")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    fakes = root / "fakes.jsonl"
    fakes.touch()
    script = bin_dir / "spark-submit"
    script.write_text(SPARK_SUBMIT.format(root=root, python=sys.executable,
                                          fake=HERE / "fake_spark_submit.py"))  # fmt: skip
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    fake = {"FAKE_SPARK_LAUNCHES": str(fakes), "FAKE_SPARK_RUN_S": "300"}
    home = root / "airflow"
    env = {
        **fake,
        **celery_env(home),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "AIRFLOW_CONN_KAFKA_DEFAULT": airflow_env.kafka_connection_env(kafka_bootstrap),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local"}),
    }
    cluster = SimpleNamespace(root=root, home=home, fake=fake, bootstrap=kafka_bootstrap, jobs=[])
    try:
        with AirflowServices.start(home, env=env) as af:
            cluster.af = af
            _workers(cluster, WORKERS)
            print(f"[celery] services+workers up {time.monotonic() - started:.0f} s")
            yield cluster
    finally:
        for line in fakes.read_text().splitlines():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(json.loads(line)["pid"], signal.SIGTERM)
        for proc in cluster.jobs:
            proc.terminate()
            proc.wait(60)


def test_a_submit_retried_on_another_worker_waits_for_the_launch_instead_of_launching_twice(
    celery, job, admin
):
    j, af = job(2), celery.af
    _workers(celery, WORKERS)
    look, samples = _sampler(j)
    _start_job(celery, j)
    dag_id = _dag(celery, j, "cold", shipped=True)
    run_id = af.trigger(dag_id)
    facts = af.wait(lambda: _launched(celery, j, look), "the submit step to launch the job", 300)
    first = facts["host"]
    assert first in WORKERS and facts["step"] == "submit", facts
    # noted before the start: the log path, in the launching worker's own temp dir
    assert facts["log_path"].startswith(str(celery.root / first / "tmp")), facts
    other = _kill_on_retry(celery, dag_id, run_id, "submit", first)
    waiting = af.wait(lambda: _said(celery, dag_id, "submit", "not launching job"),
                      "the retry to wait for the recorded launch", 120)  # fmt: skip
    assert f"launch {facts['launch_id']} on host {first}" in waiting, waiting
    (celery.root / f"gate-{j.name}").touch()  # the launched job's JVM is up: it heartbeats v2
    state, tis = _ended(celery, dag_id, run_id, look)
    assert state == "success", {t: ti["state"] for t, ti in tis.items()}
    assert tis["submit"]["try_number"] == 2, tis["submit"]
    assert len(_spawns(celery, j)) == 1  # launched once: the retry launched nothing
    record = _completed(look, admin, j)
    assert record.results["launch"]["host"] == first and record.results["launch"]["attempt"] == 1
    assert max(samples) == 1, samples  # never two instances running at once
    print(f"[celery] cold: submit on {first} killed, retried on {other}")


def test_a_standby_step_retried_on_another_worker_waits_for_its_standby_not_launching_twice(
    celery, job, admin
):
    j, af = job(2), celery.af
    _workers(celery, WORKERS)
    look, samples = _sampler(j)
    _start_job(celery, j)  # advertises the standby capability: a warm restart
    dag_id = _dag(celery, j, "warm", shipped=True)
    run_id = af.trigger(dag_id)
    facts = af.wait(lambda: _launched(celery, j, look), "the standby step to launch", 300)
    first = facts["host"]
    assert first in WORKERS and facts["step"] == "standby", facts
    other = _kill_on_retry(celery, dag_id, run_id, "submit_standby", first)
    waiting = af.wait(lambda: _said(celery, dag_id, "submit_standby", "not launching a standby"),
                      "the retry to wait for the standby noted in the record", 120)  # fmt: skip
    assert f"launch {facts['launch_id']} on host {first}" in waiting, waiting
    (celery.root / f"gate-{j.name}").touch()  # the standby's JVM is up: it heartbeats v2
    state, tis = _ended(celery, dag_id, run_id, look)
    assert state == "success", {t: ti["state"] for t, ti in tis.items()}
    assert tis["submit_standby"]["try_number"] == 2, tis["submit_standby"]
    (argv,) = _spawns(celery, j)  # one standby; the submit step launched nothing
    assert "--standby" in argv, argv
    record = _completed(look, admin, j)
    launch = record.results["launch"]
    assert (launch["host"], launch["step"], launch["attempt"]) == (first, "standby", 1), launch
    assert max(samples) == 1, samples
    print(f"[celery] warm: standby on {first} killed, retried on {other}")


def test_the_plan_waiting_for_an_in_app_job_retried_on_another_worker_waits_on(celery, job, admin):
    """The job is down when the run starts: the plan waits for it in the only worker up; a
    second worker starts, the first is killed; the retry waits on in the second until the job
    is back, and the job takes v2 itself in-app - nothing launched."""
    j, af = job(2), celery.af
    alive = [w for w in WORKERS if w in af.services]
    for name in alive[1:]:
        af.kill(name)
    first = alive[0] if alive else _workers(celery, WORKERS[:1])[0]
    other = next(w for w in WORKERS if w != first)
    look, samples = _sampler(j)
    dag_id = _dag(celery, j, "in-app", shipped=False)
    run_id = af.trigger(dag_id)
    af.wait(lambda: _said(celery, dag_id, "plan", "waiting up to", attempt=1),
            "the plan to wait for the job in its worker", 180)  # fmt: skip
    _workers(celery, [other])
    af.kill(first)  # SIGKILL of the worker and its task, mid-step
    af.wait_ti(dag_id, run_id, "plan", "running", until=lambda ti: ti["try_number"] == 2,
               timeout_s=180)  # fmt: skip
    af.wait(lambda: _said(celery, dag_id, "plan", "waiting up to"),
            "the retry to wait for the job", 120)  # fmt: skip
    _start_job(celery, j, FAKE_SPARK_IN_APP="1")  # the job is back
    state, tis = _ended(celery, dag_id, run_id, look)
    assert state == "success", {t: ti["state"] for t, ti in tis.items()}
    assert tis["plan"]["try_number"] == 2, tis["plan"]
    assert _spawns(celery, j) == []  # Airflow launched nothing
    record = _completed(look, admin, j)
    assert record.results["plan"]["restart"]["mode"] == "in-app", record.results["plan"]
    assert "launch" not in record.results, record.results
    assert max(samples) == 1, samples
    print(f"[celery] in-app: plan on {first} killed, retried on {other}")


def _workers(celery, names) -> list[str]:
    """Start those of worker ``names`` not running (each a machine of its own); the names."""
    for name in names:
        if name not in celery.af.services:
            start_worker(celery.af, name, celery.root / name)
    return list(names)


def _dag(celery, j, restart: str, *, shipped: bool) -> str:
    dag_id = f"celery_{restart.replace('-', '_')}_{j.name.replace('-', '_')}"
    spec = {"dag_id": dag_id, "job_name": j.name, "topic": j.topic,
            "bootstrap": celery.bootstrap, "restart": restart, "shipped": shipped}  # fmt: skip
    (celery.af.dags_folder / f"{dag_id}.py").write_text(DAG_FILE.format(spec=json.dumps(spec)))
    celery.af.wait_dag(dag_id)
    return dag_id


def _sampler(j):
    """``look()`` -> (record, heartbeats), each look sampling the live running processors."""
    samples: list[int] = []

    def look():
        j.store.refresh()
        beats = j.store.processors()
        samples.append(
            sum(1 for p in beats.values() if p.get("state") == "running" and is_alive(p))
        )
        return (j.store.expansions() or [None])[0], beats

    return look, samples


def _start_job(celery, j, **env: str) -> subprocess.Popen:
    """vN: the fake job on job model v1, started by hand (not by Airflow)."""
    args = ["--job-name", j.name, "--bootstrap-servers", celery.bootstrap, "--coordinator", "kafka"]
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "fake_spark_submit.py"), *args],
        env={**os.environ, **celery.fake, **env}, cwd=celery.root,
    )  # fmt: skip
    celery.jobs.append(proc)
    deadline = time.monotonic() + 60
    while not acknowledging(j.store.processors(), 1):
        assert time.monotonic() < deadline, "v1 did not start"
        j.store.refresh()
        time.sleep(0.2)
    return proc


def _spawns(celery, j) -> list[str]:
    path = celery.root / f"spawns-{j.name}.txt"
    return path.read_text().splitlines() if path.exists() else []


def _launched(celery, j, look) -> dict | None:
    """The record's launch once it is noted and spark-submit started."""
    record, _ = look()
    facts = (record.results.get("launch") if record else None) or {}
    return facts if facts and _spawns(celery, j) else None


def _kill_on_retry(celery, dag_id: str, run_id: str, task_id: str, worker: str) -> str:
    """SIGKILL ``worker`` with its task, mid-step; the other worker, once the retry runs. A
    launching step is killed once its launch is detached (the launcher exited: the launch is
    no process of the worker's any more, as a cluster manager's job is not): before that, the
    kill takes the launch with it and the retry rightly launches again after its window."""
    if task_id in ("submit", "submit_standby"):
        celery.af.wait(lambda: _said(celery, dag_id, task_id, "detached: pid", attempt=1),
                       "the launch to be detached from the worker", 120)  # fmt: skip
    celery.af.kill(worker)
    celery.af.wait_ti(dag_id, run_id, task_id, "running", until=lambda ti: ti["try_number"] == 2,
                      timeout_s=180)  # fmt: skip
    return next(w for w in WORKERS if w != worker)


def _said(celery, dag_id: str, task_id: str, text: str, attempt: int = 2) -> str | None:
    """The line of the task's try ``attempt``'s log that says ``text``, once it does."""
    pattern = f"dag_id={dag_id}/*/task_id={task_id}/attempt={attempt}.log"
    for path in (celery.home / "logs").glob(pattern):
        for line in path.read_text(errors="replace").splitlines():
            if text in line:
                return line
    return None


def _ended(celery, dag_id: str, run_id: str, look) -> tuple[str, dict]:
    """The run's end state and task instances, sampling the processors meanwhile."""

    def ended():
        look()
        status, run = celery.af.api("GET", f"dags/{dag_id}/dagRuns/{run_id}")
        found = run.get("state") if status == 200 else None
        return found if found in ("success", "failed") else None

    state = celery.af.wait(ended, "the run to end", 600)
    return state, celery.af.task_instances(dag_id, run_id)


def _completed(look, admin, j):
    record, beats = look()
    assert record.status == "completed", record
    assert acknowledging(beats, 2), beats
    assert admin.partition_counts([j.topic]) == {j.topic: 4}
    return record
