"""SIGKILL of a real triggerer while the barrier or the ack wait is deferred, with
real Airflow services (`airflow_samza_expand._testing.airflow_services`: api-server, scheduler
with the LocalExecutor, dag-processor, triggerer) on the Kafka of the run:

the factory's expansion DAG (warm handover) is in the dags folder and triggered through the
REST API; once the wait's task is DEFERRED and its trigger runs in the triggerer (the trigger
renews the expansion lease), the triggerer is SIGKILLed with everything it started and a new
one is started. The new triggerer runs the same trigger from its serialized kwargs (its
deadline, holder and expansion id; the grace start and the snapshot are in the expansion
record); only then does the test let the wait hold (the job commits past the barrier; the
restarted job runs vN+1). The run ends success, the expansion completed once (one growth, job
models [1, 2], one record, completed; the job launched once), and the wait's task was resumed,
not rerun (its try number unchanged; the barrier snapshot taken once).

The job is `fake_spark_submit.py` (no Spark): this proves the triggers' state, not counts.
The services start once per module (about 40 s on the busy 2-core machine, 5 s to stop);
each wait case then takes 35-60 s, 7-13 s of it from the kill to the trigger polling again.
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
from kafka_helpers import commit_offsets, produce_keyed

from airflow_samza_expand._testing.airflow_services import AirflowServices
from airflow_samza_expand.core._liveness import acknowledging

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(600)]
HERE = Path(__file__).resolve().parent
DAG_FILE = """\
import json
from datetime import timedelta

from airflow_samza_expand.dags import (
    BarrierSettings, JobSettings, KafkaSettings, RestartSettings, SparkSettings,
    build_expansion_dag, stream_job_args,
)

SPEC = json.loads({spec!r})
dag = build_expansion_dag(
    SPEC["dag_id"],
    job=JobSettings(
        name=SPEC["job_name"],
        topics=[SPEC["topic"]],
        application_args=stream_job_args(
            job_name=SPEC["job_name"],
            bootstrap_servers=SPEC["bootstrap"],
            checkpoint_dir=SPEC["log_dir"] + "/checkpoint",
            output_topic=SPEC["topic"] + "-out",
        ),
    ),
    spark=SparkSettings(log_dir=SPEC["log_dir"]),
    barrier=BarrierSettings(producer_refresh_grace_s=1.0, barrier_timeout_s=300.0),
    restart=RestartSettings(stop_timeout_s=60.0, ack_timeout_s=300.0),
    kafka=KafkaSettings(check_partitioner=False),
    poll_interval_s=0.5,
    retries=0,
    retry_delay=timedelta(seconds=1),
)
"""


@pytest.fixture(scope="module")
def services(kafka_bootstrap, tmp_path_factory) -> SimpleNamespace:
    """The four Airflow services for this module, `fake_spark_submit.py` as ``spark-submit``
    on their PATH (launches in ``launches``; a vN+1 launch runs once ``gates/<job>`` exists)."""
    root = tmp_path_factory.mktemp("triggerer-kill")
    bin_dir, gates = root / "bin", root / "gates"
    bin_dir.mkdir()
    gates.mkdir()
    script = bin_dir / "spark-submit"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} {HERE / "fake_spark_submit.py"} "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    launches = root / "launches.jsonl"
    launches.touch()
    fake = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_SPARK_LAUNCHES": str(launches),
        "FAKE_SPARK_RUN_S": "240",
        "FAKE_SPARK_GATE_DIR": str(gates),
    }
    env = {
        **fake,
        "AIRFLOW_CONN_KAFKA_DEFAULT": airflow_env.kafka_connection_env(kafka_bootstrap),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local"}),
    }
    started = time.monotonic()
    with AirflowServices.start(root / "airflow", env=env) as af:
        print(f"[triggerer-kill] services up in {time.monotonic() - started:.1f} s")
        yield SimpleNamespace(af=af, root=root, gates=gates, launches=launches, fake=fake)
        for line in launches.read_text().splitlines():  # the fake jobs launched
            with contextlib.suppress(ProcessLookupError):
                os.kill(json.loads(line)["pid"], signal.SIGTERM)


def _start_v1(j, services, kafka_bootstrap) -> subprocess.Popen:
    """vN: a fake job process running job model v1 (it stops on the stop request)."""
    args = ["--job-name", j.name, "--bootstrap-servers", kafka_bootstrap, "--coordinator", "kafka"]
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "fake_spark_submit.py"), *args],
        env={**os.environ, **services.fake}, cwd=services.root,
    )  # fmt: skip
    services.af.wait(
        lambda: j.store.refresh() or acknowledging(j.store.processors(), 1), "v1 running"
    )
    return proc


def _step_on(j, task_id: str):
    """The expansion record once ``task_id``'s step began (the barrier's: its snapshot taken)."""
    j.store.refresh()
    records = j.store.expansions()
    if records and task_id in records[0].steps and (task_id != "barrier" or records[0].barrier):
        return records[0]
    return None


def _v2_launches(launches: Path, job_name: str) -> list[list[str]]:
    argvs = [json.loads(line)["argv"] for line in launches.read_text().splitlines() if line]
    return [a for a in argvs if job_name in a and "--job-model-version" in a]


@pytest.mark.parametrize("task_id", ["barrier", "ack"])
def test_a_triggerer_killed_while_a_wait_is_deferred_resumes_it_in_a_new_triggerer(
    services, job, admin, kconfig, kafka_bootstrap, task_id
):
    af, started = services.af, time.monotonic()
    j = job(2)
    if task_id == "barrier":
        produce_keyed(kconfig, j.topic, 40)  # the job has not committed these: the barrier waits
        (services.gates / j.name).touch()  # the restarted job runs v2 at once
    dag_id = f"trigkill_{task_id}_{j.name.replace('-', '_')}"
    spec = {"dag_id": dag_id, "job_name": j.name, "topic": j.topic, "bootstrap": kafka_bootstrap,
            "log_dir": str(services.root / "logs" / j.name)}  # fmt: skip
    (af.dags_folder / f"{dag_id}.py").write_text(DAG_FILE.format(spec=json.dumps(spec)))
    v1 = _start_v1(j, services, kafka_bootstrap)
    try:
        af.wait_dag(dag_id)
        phases = {"parsed": time.monotonic() - started}
        run_id = af.trigger(dag_id)
        old = af.wait_healthy("triggerer")
        before = af.wait_trigger_polls(dag_id, run_id, task_id, old, j.store)
        record = af.wait(lambda: _step_on(j, task_id), f"the {task_id} step's wait to be on")
        phases["deferred"] = time.monotonic() - started
        af.kill("triggerer")  # SIGKILL: the triggerer and its trigger runner
        if task_id == "barrier":  # more records: a snapshot taken again would differ
            produce_keyed(kconfig, j.topic, 40, prefix="after-kill")
        af.start_service("triggerer")
        new = af.wait_healthy("triggerer")
        assert new["id"] != old["id"], (old, new)
        after = af.wait_trigger_polls(dag_id, run_id, task_id, new, j.store)
        phases["resumed"] = time.monotonic() - started
        print(f"[triggerer-kill] {task_id}: triggerer {old['id']} killed, {new['id']} runs it")
        if task_id == "barrier":  # the job commits past the snapshot, the barrier holds
            highs = admin.high_watermarks({j.topic: [0, 1]})[j.topic]
            commit_offsets(kconfig, j.name, j.topic, highs)
        else:  # the restarted job runs v2, the ack holds
            (services.gates / j.name).touch()
        state = af.wait_run(dag_id, run_id)
        phases["ended"] = time.monotonic() - started
        tis = af.task_instances(dag_id, run_id)
    finally:
        (services.gates / j.name).touch()
        v1.wait(60)
    assert state == "success", {t: ti["state"] for t, ti in tis.items()}
    assert {ti["state"] for ti in tis.values()} == {"success"}, tis
    # resumed, not rerun: one try, the trigger of the first deferral carried on
    assert before["try_number"] == after["try_number"] == tis[task_id]["try_number"] == 1
    assert before["trigger"]["id"] == after["trigger"]["id"], (before, after)
    j.store.refresh()
    assert admin.partition_counts([j.topic]) == {j.topic: 4}
    assert [m.version for m in j.store.job_model_history()] == [1, 2]
    (final,) = j.store.expansions()
    assert final.expansion_id == record.expansion_id and final.status == "completed"
    assert final.steps[task_id].started_at == record.steps[task_id].started_at
    if task_id == "barrier":  # the snapshot the first triggerer took is the one that held
        assert record.barrier and final.barrier == record.barrier, (record.barrier, final.barrier)
    assert len(_v2_launches(services.launches, j.name)) == 1  # the warm standby, once
    assert acknowledging(j.store.processors(), 2), j.store.processors()
    figures = " ".join(f"{k}={v:.1f}s" for k, v in phases.items())
    print(f"[triggerer-kill] {task_id}: {figures}")


WATCH_DAG = """\
from airflow.sdk import DAG, Asset, AssetWatcher, task

from airflow_samza_expand.airflow.triggers import PartitionCountChangeTrigger

watch = PartitionCountChangeTrigger(topic={topic!r}, job_name={job!r}, poll_interval_s=0.5)
asset = Asset(
    name={dag_id!r}, uri="kafka://default/{topic}",
    watchers=[AssetWatcher(name={dag_id!r} + "_watch", trigger=watch)],
)
with DAG({dag_id!r}, schedule=[asset]):

    @task
    def grown():
        return None

    grown()
"""


def test_a_growth_while_no_triggerer_runs_still_fires_the_watcher(services, job, admin):
    """The asset watcher's trigger (the example DAG samza_expand_on_partition_change's) with
    ``job_name``: its baseline is the count the job's newest job model covers (in the store),
    not the count its first poll saw, so a topic grown while the triggerer was down still fires
    once a new triggerer runs it (with an in-memory baseline, the new trigger would take the
    grown count as its baseline and never fire)."""
    af = services.af
    j = job(2)
    dag_id = f"trigkill_watch_{j.name.replace('-', '_')}"
    (af.dags_folder / f"{dag_id}.py").write_text(
        WATCH_DAG.format(topic=j.topic, job=j.name, dag_id=dag_id)
    )
    af.wait_dag(dag_id)
    af.wait(lambda: j.topic in af.log_text("triggerer"), "the watcher's trigger to poll")
    assert _runs(af, dag_id) == 0  # nothing grew yet: no event
    af.kill("triggerer")
    admin.create_partitions(j.topic, 4)  # grown while no triggerer runs
    af.start_service("triggerer")
    af.wait_healthy("triggerer")
    af.wait(lambda: _runs(af, dag_id) > 0, f"{dag_id} to run for the growth", timeout_s=90)


def _runs(af, dag_id: str) -> int:
    status, body = af.api("GET", f"dags/{dag_id}/dagRuns")
    assert status == 200, body
    return int(body["total_entries"])
