"""Faults in the middle of an expansion, through real Airflow task processes (``dag.test()`` in
a process of its own, `dag_runner.py`) on the Kafka of the run (Apache Kafka in CI):

* one expansion whose DAG run process is SIGKILLed (with its task processes) once each of the
  warm handover's own steps and its ack has begun, in turn: the run is cleared (the same
  logical date run again, as ``airflow tasks clear`` + the scheduler would) and the clearing
  killed in the next step, until a clearing completes it: the expansion completes exactly once
  (one growth, one job model v2, the job launched at most once more than the chain launches
  it), and the record says completed (each step killed in a run of its own, with the real job
  and live traffic: ``kill/warm/<step>`` of benchmarks/fault_matrix.py);
* the lease with two DAG runs: run A's barrier, deferred longer than the lease's TTL, keeps
  it renewed while run B (a manual trigger) waits; then A dies holding it, and B waits for
  it to expire, takes the expansion over and finishes it; A, cleared later, ends with its
  steps skipped and writes nothing.

The job is `fake_spark_submit.py`: the coordinator protocol without Spark and without
traffic, so these tests prove the chain's ownership and idempotence, not record counts.
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

import airflow_env
import pytest
import test_airflow_handover as handover
import test_airflow_ownership as ownership
from race_dags import build

from airflow_samza_expand.core._liveness import acknowledging

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(600)]
HERE = ownership.HERE
fake_spark = ownership.fake_spark  # the fake spark-submit on PATH (fixture)
A_DATE = "2026-03-01T00:00:00+00:00"
B_DATE = "2026-03-02T00:00:00+00:00"
# record steps of the warm chain, in the order dag.test() runs them
# The steps of the warm chain that the default restart (in place) does not have, and its ack:
# plan, expand, the barrier, write and report are killed midway with the real job, one
# expansion through every in-place step (test_airflow_fault_matrix.py, kill/in-place/each-step)
KILL_AT = ("standby", "stop", "submit", "ack")


def _run(spec: dict, logical_date: str, tmp_path: Path, *, hold: bool = False):
    """One whole DAG run in its own process group (so a kill takes its task processes too;
    the detached job launches run in sessions of their own and survive, as in production).
    ``hold``: the process starts (imports, builds the DAG) but runs only once the returned
    ``go`` file exists - a later run without the start-up wait."""
    go = tmp_path / f"go-{time.monotonic_ns()}"
    if not hold:
        go.touch()
    doc = {"dag": spec, "logical_date": logical_date, "go": str(go), "ready": f"{go}.ready"}
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "dag_runner.py"), json.dumps(doc)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    return proc, go


def _result(proc: subprocess.Popen, tmp_path: Path) -> dict:
    out, _ = proc.communicate(timeout=400)
    (tmp_path / f"run-{proc.pid}.log").write_text(out)
    assert proc.returncode == 0, out[-4000:]
    return json.loads(out.strip().splitlines()[-1])


def _kill_when(proc: subprocess.Popen, j, step: str) -> dict[str, object]:
    """SIGKILL `proc`'s process group as soon as the expansion record shows `step` begun;
    returns where the run stood (steps begun and ended at the kill)."""
    _when_step_began(proc, j, step)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    record = j.store.expansions()[0]
    return {
        "begun": sorted(record.steps),
        "ended": sorted(s for s, t in record.steps.items() if t.ended_at),
        "id": record.expansion_id,
    }


def _expanded_once(j, admin, fake_spark, expansion_id: str, *, max_launches: int) -> None:
    j.store.refresh()
    assert admin.partition_counts([j.topic]) == {j.topic: 4}
    assert [m.version for m in j.store.job_model_history()] == [1, 2]
    assert [r.expansion_id for r in j.store.expansions()] == [expansion_id]
    record = j.store.get_expansion(expansion_id)
    assert record.status == "completed", record.status
    v2_launches = [a for a in ownership._launches(fake_spark) if "--job-model-version" in a]
    assert 1 <= len(v2_launches) <= max_launches, v2_launches
    assert acknowledging(j.store.processors(), 2), j.store.processors()


def test_one_run_killed_midway_in_each_warm_step_completes_exactly_once_when_cleared(
    job, admin, fake_spark, tmp_path, kafka_bootstrap, monkeypatch
):
    # the v2 standby is launched in the first run and must still run at the last check: the
    # four runs and their kills take over the fixture's 90 s on a loaded machine
    monkeypatch.setenv("FAKE_SPARK_RUN_S", "600")
    j = job(2)
    spec = ownership._spec(
        j, tmp_path, kafka_bootstrap, f"fault_{j.name}", barrier={"producer_refresh_grace_s": 2.0}
    )
    airflow_env.serialize_dag_to_db(build(**spec))
    v1 = handover._start_v1(j, tmp_path, kafka_bootstrap)
    run, _ = _run(spec, A_DATE, tmp_path)
    runs = [run]
    try:
        for step in KILL_AT:  # each clearing is killed in the next step, the last one completes
            cleared, go = _run(spec, A_DATE, tmp_path, hold=True)
            runs.append(cleared)
            at_kill = _kill_when(run, j, step)
            print(f"[fault] killed once {step!r} began: {at_kill}")
            go.touch()
            run = cleared
        result = _result(run, tmp_path)
    finally:
        _stop(*runs, v1)
    assert result["state"] == "success", result
    # a launch killed before it was recorded may be launched again: once more at most
    _expanded_once(j, admin, fake_spark, str(at_kill["id"]), max_launches=2)


def test_a_deferred_barrier_keeps_the_lease_past_its_ttl_and_a_dead_holder_is_taken_over(
    job, admin, fake_spark, tmp_path, kafka_bootstrap
):
    """A's barrier waits (deferred, a grace of three times its lease's TTL): its trigger renews
    the lease, so B, triggered while A runs, finds it held past twice the TTL and waits (the
    TTL stays above the longest step that does not renew: the standby launch's start-up
    check). A then dies in the barrier holding the lease: B takes the expansion over once A's
    lease expired and finishes it; A, cleared later, ends with its steps skipped and writes
    nothing."""
    ttl = 8.0
    j = job(2)
    spec = ownership._spec(
        j, tmp_path, kafka_bootstrap, f"takeover_{j.name}",
        barrier={"producer_refresh_grace_s": 3 * ttl}, ownership={"lease_ttl_s": ttl},
    )  # fmt: skip
    airflow_env.serialize_dag_to_db(build(**spec))
    v1 = handover._start_v1(j, tmp_path, kafka_bootstrap)
    a, _ = _run(spec, A_DATE, tmp_path)
    b, go_b = _run(spec, B_DATE, tmp_path, hold=True)
    a_again, go_a = _run(spec, A_DATE, tmp_path, hold=True)
    try:
        _when_step_began(a, j, "plan")
        lease_a = j.store.get_lease("expansion")  # taken before the plan's record
        go_b.touch()  # B starts while A runs; its plan waits for A's lease
        renewed = _when_renewed(a, j, lease_a, past_s=2 * ttl)  # B waiting all along
        assert b.poll() is None, "B ended while A held the lease"
        at_kill = _kill_when(a, j, "barrier")
        b_result = _result(b, tmp_path)
        j.store.refresh()
        after_b = (j.store.get_lease("expansion"), j.store.get_expansion(str(at_kill["id"])))
        go_a.touch()  # A cleared later
        a_result = _result(a_again, tmp_path)
    finally:
        _stop(a, b, a_again, v1)
    assert "barrier" not in at_kill["ended"], at_kill  # A died in its deferred barrier
    assert renewed.epoch == lease_a.epoch and renewed.holder == lease_a.holder, renewed
    assert b_result["state"] == "success", b_result
    assert set(b_result["tasks"].values()) == {"success"}, b_result
    _expanded_once(j, admin, fake_spark, str(at_kill["id"]), max_launches=1)
    assert after_b[0].holder != lease_a.holder and after_b[0].epoch > lease_a.epoch, after_b
    assert after_b[1].owner == after_b[0].holder, after_b  # B owns the expansion it finished
    assert a_result["state"] == "success", a_result
    assert a_result["tasks"]["plan"] == "skipped", a_result
    j.store.refresh()  # A wrote nothing: not a lease, not a record, not a model
    assert j.store.get_lease("expansion") == after_b[0]
    assert j.store.get_expansion(str(at_kill["id"])) == after_b[1]
    assert [m.version for m in j.store.job_model_history()] == [1, 2]


def _stop(*procs: subprocess.Popen) -> None:
    """Leave nothing running: a run still held or going is killed with its process group."""
    for proc in procs:
        if proc.poll() is None and "dag_runner.py" in " ".join(map(str, proc.args)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(60)


def _when_renewed(proc: subprocess.Popen, j, lease, *, past_s: float):
    """The expansion lease once its holder renewed it to expire ``past_s`` after ``lease``
    did (the same holder and epoch, or the test fails)."""
    deadline = time.monotonic() + 180
    while True:
        assert proc.poll() is None, "the run ended before its lease was renewed"
        assert time.monotonic() < deadline, f"the lease was never renewed past {past_s} s"
        now = j.store.get_lease("expansion")
        assert now.holder == lease.holder and now.epoch == lease.epoch, (lease, now)
        if (now.expires_at() - lease.expires_at()).total_seconds() >= past_s:
            return now
        time.sleep(0.2)


def _when_step_began(proc: subprocess.Popen, j, step: str) -> float:
    """The monotonic time at which this test saw `step` begun in the expansion record."""
    deadline = time.monotonic() + 180
    while True:
        assert proc.poll() is None, f"the run ended before step {step!r} began"
        assert time.monotonic() < deadline, f"step {step!r} never began"
        records = j.store.expansions()
        if records and step in records[0].steps:
            return time.monotonic()
        time.sleep(0.02)
