"""The warm handover's standby step retried on another worker after its first try launched the
standby and died before it finished (a worker lost mid-step): the retry decides from the
expansion record and the processors' heartbeats alone, so it waits for the launch it finds
noted there and launches no second standby.

Each try runs `LaunchStandbyOperator.execute` in a process of its own with a worker's own temp
dir, HOME and launch host name (``SAMZA_EXPAND_HOST``): nothing of worker A's (its state file,
its pids) is visible to worker B. The first try is SIGKILLed while its launch is still starting
(the fake ``spark-submit`` waits for a gate file before it heartbeats); the detached launch
lives on. The job is `fake_spark_submit.py` (it plays ``--standby --job-model-version N``).
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

import airflow_env  # noqa: F401 - a temporary AIRFLOW_HOME before airflow is imported
import pytest

from airflow_samza_expand._protocol.job import launches
from airflow_samza_expand.core._clock import now_iso
from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus

pytestmark = pytest.mark.kafka
HERE = Path(__file__).resolve().parent
# spark-submit as the workers run it: notes the spawn, then "starts the JVM" until the gate
# file exists (no heartbeat meanwhile), then plays the standby (fake_spark_submit.py)
SPARK_SUBMIT = """#!/bin/sh
echo "$$ $*" >> {spawns}
while [ ! -e {gate} ]; do sleep 0.2; done
exec {python} {fake} "$@"
"""
# one try of the standby step, as a worker runs it; prints its result as the last line
TRY = """
import json, logging, sys
from types import SimpleNamespace
from airflow_samza_expand.airflow.operators._standby import LaunchStandbyOperator

logging.basicConfig(level=logging.INFO, stream=sys.stdout)
spec = json.loads(sys.argv[1])
op = LaunchStandbyOperator(
    task_id="submit_standby", job_name=spec["job"], expansion_id=spec["eid"],
    application="job.py",
    application_args=["--job-name", spec["job"], "--bootstrap-servers", spec["bootstrap"]],
    startup_check_s=300.0, launch_window_s=300.0,
)
ti = SimpleNamespace(dag_id="standby_retry", task_id="submit_standby", run_id="manual__t",
                     try_number=spec["try"])
print(json.dumps(op.execute({"ti": ti}), default=str), flush=True)
"""


def _expanded(j) -> str:
    """The job's expansion to v2, expanded: where the standby step starts."""
    eid = f"{j.name}~{j.topic}.2-4"
    stamp = now_iso()
    record = ExpansionRecord(
        expansion_id=eid, job_name=j.name, base_version=1, target_version=2,
        plan={"counts_before": {j.topic: 2}, "counts_after": {j.topic: 4}},
        status=ExpansionStatus.EXPANDED, owner="airflow:standby_retry/manual__t",
        created_at=stamp, updated_at=stamp,
    )  # fmt: skip
    j.store.put_expansion(record, expected_revision=0)
    return eid


def _worker(tmp_path: Path, name: str, env: dict[str, str]) -> dict[str, str]:
    """The environment of worker ``name``: its own temp dir, HOME and launch host name."""
    root = tmp_path / name
    for sub in ("tmp", "home"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    return {**env, "TMPDIR": str(root / "tmp"), "HOME": str(root / "home"),
            "SAMZA_EXPAND_HOST": name}  # fmt: skip


def _wait(what: str, check, timeout_s: float = 120.0):
    deadline = time.monotonic() + timeout_s
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_a_standby_retried_on_another_worker_waits_for_the_noted_launch_not_launching_twice(
    job, kafka_conn, kafka_bootstrap, tmp_path
):
    j = job(2)
    eid = _expanded(j)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    spawns, gate, fakes = tmp_path / "spawns.txt", tmp_path / "jvm-started", tmp_path / "f.jsonl"
    spawns.touch()
    fakes.touch()
    script = bin_dir / "spark-submit"
    script.write_text(SPARK_SUBMIT.format(spawns=spawns, gate=gate, python=sys.executable,
                                          fake=HERE / "fake_spark_submit.py"))  # fmt: skip
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_SPARK_LAUNCHES": str(fakes),
        "FAKE_SPARK_RUN_S": "120",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local"}),
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    spec = {"job": j.name, "eid": eid, "bootstrap": kafka_bootstrap}

    def attempt(worker: str, number: int) -> subprocess.Popen:
        with open(tmp_path / f"try-{number}.log", "w", encoding="utf-8") as log:
            return subprocess.Popen(
                [sys.executable, "-c", TRY, json.dumps({**spec, "try": number})],
                env=_worker(tmp_path, worker, env), stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip

    said = lambda: (tmp_path / "try-2.log").read_text(errors="replace")  # noqa: E731

    spawned = lambda: spawns.read_text().splitlines()  # noqa: E731
    first = attempt("worker-a", 1)
    second = None
    try:
        _wait("the first try to launch the standby", spawned)
        first.kill()  # the worker is lost mid-step; its detached launch lives on
        first.wait(30)
        second = attempt("worker-b", 2)
        # the retry either waits for the noted launch or (the defect) launches a second copy
        _wait("the retry to decide", lambda: len(spawned()) > 1 or "on host worker-a" in said())
        assert len(spawned()) == 1, spawned()  # no second standby while the first may come up
        gate.touch()  # the first standby's JVM is up: it heartbeats v2
        second.wait(120)
    finally:
        gate.touch()
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
        for line in fakes.read_text().splitlines():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(json.loads(line)["pid"], signal.SIGTERM)
    out = said()
    assert second.returncode == 0, out
    result = json.loads(out.strip().splitlines()[-1])
    assert result["launched"] == 0 and result["live"], result
    assert len(spawned()) == 1, spawned()
    assert "launch" in out and "on host worker-a" in out, out  # it said what it waited for
    facts = launches.facts_of(j.store.get_expansion(eid))
    assert facts["host"] == "worker-a" and facts["step"] == "standby", facts
    assert facts["log_path"].startswith(str(tmp_path / "worker-a" / "tmp")), facts
