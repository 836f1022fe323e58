"""The expansion DAG on Airflow's CeleryExecutor with two workers that share nothing but the
metadata database (through the api-server), the Celery broker and Kafka - each its own temp
directory, HOME and launch host name (`_testing.celery_workers`) - and the worker of the
submit step killed mid-step, so that its retry runs on the other worker.

The submit task (cold restart of the shipped job) notes its launch in the expansion record
and starts it; while the launched job is still starting (no heartbeat yet: its "JVM" waits
for a gate), the worker running the task is SIGKILLed with everything it started (the launch
is detached: it lives on). The retry on the other worker finds the launch in the record and
waits for it instead of launching a second copy; once the job heartbeats v2, it ends without
a launch. The run ends success, the record completed, at most one live processor running at
every sample, the topic grown, one spawn.

The job is `fake_spark_submit.py` (no Spark): this proves the decision across workers in the
suite's time. benchmarks/celery_workers.py runs the same setup with the real jobs - the cold
and warm restarts of the shipped job and an in-app restart of a user's job - under keyed
traffic, with exact counts and per-key order.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import airflow_env
import pytest

from airflow_samza_expand._testing.airflow_services import AirflowServices
from airflow_samza_expand._testing.celery_workers import (
    WORKERS,
    CeleryWorkers,
    celery_env,
    spawn_noting_submit,
    spawns,
)
from airflow_samza_expand.core._liveness import acknowledging, is_alive

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(900)]
HERE = Path(__file__).resolve().parent
DAG_FILE = """\
import json
from datetime import timedelta

from airflow_samza_expand.dags import (
    BarrierSettings, JobSettings, KafkaSettings, RestartSettings, SparkSettings,
    build_expansion_dag, stream_job_args,
)

SPEC = json.loads({spec!r})
args = stream_job_args(job_name=SPEC["job_name"], bootstrap_servers=SPEC["bootstrap"],
                       checkpoint_dir="checkpoint", output_topic=SPEC["topic"] + "-out")
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
    # the start-up check outlasts the kill: the worker dies while the launching step runs
    spark=SparkSettings(submit_kwargs={{"startup_check_s": 120.0}}),
)
"""
# the fake's "JVM" starts once the job's gate file exists (no heartbeat meanwhile)
GATED_FAKE = """while [ ! -e {root}/gate-$job ]; do sleep 0.2; done
exec {python} {fake} "$@"
"""


@pytest.fixture(scope="module")
def celery(kafka_bootstrap, tmp_path_factory):
    """The services (CeleryExecutor, SQLite broker and backend) and both workers;
    ``spark-submit`` on their PATH notes its spawn and runs the gated fake above."""
    started = time.monotonic()
    root = tmp_path_factory.mktemp("celery")
    fakes = root / "fakes.jsonl"
    fakes.touch()
    gated = GATED_FAKE.format(root=root, python=sys.executable, fake=HERE / "fake_spark_submit.py")
    bin_dir = spawn_noting_submit(root, gated)
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
            cluster.af, cluster.workers = af, CeleryWorkers(af, root)
            cluster.workers.up()
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
    j, af, workers = job(2), celery.af, celery.workers
    look, samples = _sampler(j)
    _start_job(celery, j)
    dag_id = _dag(celery, j, "cold")
    run_id = af.trigger(dag_id)
    facts = af.wait(lambda: _launched(celery, j, look), "the submit step to launch the job", 300)
    first = facts["host"]
    assert first in WORKERS and facts["step"] == "submit", facts
    # noted before the start: the log path, in the launching worker's own temp dir
    assert facts["log_path"].startswith(str(celery.root / first / "tmp")), facts
    other = workers.kill_on_retry(dag_id, run_id, "submit", first)
    waiting = af.wait(lambda: workers.said(dag_id, "submit", "not launching job"),
                      "the retry to wait for the recorded launch", 120)  # fmt: skip
    assert f"launch {facts['launch_id']} on host {first}" in waiting, waiting
    (celery.root / f"gate-{j.name}").touch()  # the launched job's JVM is up: it heartbeats v2
    state, tis = workers.ended(dag_id, run_id, look, timeout_s=600)
    assert state == "success", {t: ti["state"] for t, ti in tis.items()}
    assert tis["submit"]["try_number"] == 2, tis["submit"]
    assert len(spawns(celery.root, j.name)) == 1  # launched once: the retry launched nothing
    record = _completed(look, admin, j)
    assert record.results["launch"]["host"] == first and record.results["launch"]["attempt"] == 1
    assert max(samples) == 1, samples  # never two instances running at once
    print(f"[celery] cold: submit on {first} killed, retried on {other}")


def _dag(celery, j, restart: str) -> str:
    dag_id = f"celery_{restart.replace('-', '_')}_{j.name.replace('-', '_')}"
    spec = {"dag_id": dag_id, "job_name": j.name, "topic": j.topic,
            "bootstrap": celery.bootstrap, "restart": restart}  # fmt: skip
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


def _start_job(celery, j) -> subprocess.Popen:
    """vN: the fake job on job model v1, started by hand (not by Airflow)."""
    args = ["--job-name", j.name, "--bootstrap-servers", celery.bootstrap, "--coordinator", "kafka"]
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "fake_spark_submit.py"), *args],
        env={**os.environ, **celery.fake}, cwd=celery.root,
    )  # fmt: skip
    celery.jobs.append(proc)
    deadline = time.monotonic() + 60
    while not acknowledging(j.store.processors(), 1):
        assert time.monotonic() < deadline, "v1 did not start"
        j.store.refresh()
        time.sleep(0.2)
    return proc


def _launched(celery, j, look) -> dict | None:
    """The record's launch once it is noted and spark-submit started."""
    record, _ = look()
    facts = (record.results.get("launch") if record else None) or {}
    return facts if facts and spawns(celery.root, j.name) else None


def _completed(look, admin, j):
    record, beats = look()
    assert record.status == "completed", record
    assert acknowledging(beats, 2), beats
    assert admin.partition_counts([j.topic]) == {j.topic: 4}
    return record
