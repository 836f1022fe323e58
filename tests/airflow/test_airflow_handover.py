"""The warm restart through real Airflow (``dag.test()``) on real Kafka: with
``RestartSettings(restart="warm")`` the factory launches the vN+1 processor as a standby right
after the expansion, before vN is stopped, and the submit step launches nothing; ``"cold"``
launches after the write; ``hot_standby=True`` adds a second vN+1 processor. The job is
`fake_spark_submit.py` (it plays ``--standby --job-model-version N``); tests/e2e run the real one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import test_airflow_ownership as ownership
from airflow_env import task_instance_xcom, task_states
from race_dags import build

from airflow_samza_expand.core._clock import parse_iso
from airflow_samza_expand.core._liveness import acknowledging
from airflow_samza_expand.dags import (
    JobSettings,
    RestartSettings,
    build_expansion_dag,
    stream_job_args,
)

pytestmark = pytest.mark.kafka
HERE, _launches, _spec, _wait_for = (
    ownership.HERE,
    ownership._launches,
    ownership._spec,
    ownership._wait_for,
)
fake_spark = ownership.fake_spark  # the fake spark-submit on PATH (fixture)


def _start_v1(j, tmp_path, kafka_bootstrap) -> subprocess.Popen:
    """vN = a fake job process running job model v1 (it stops on the stop request)."""
    args = ["--job-name", j.name, "--bootstrap-servers", kafka_bootstrap, "--coordinator", "kafka"]
    proc = subprocess.Popen([sys.executable, str(HERE / "fake_spark_submit.py"), *args],
                            env=dict(os.environ), cwd=tmp_path)  # fmt: skip
    _wait_for(lambda: j.store.refresh() or acknowledging(j.store.processors(), 1), "v1 running")
    return proc


def test_warm_handover_starts_the_standby_before_the_stop_and_submit_launches_nothing(
    job, fake_spark, tmp_path, kafka_bootstrap, run_dag
):
    j = job(2)
    v1 = _start_v1(j, tmp_path, kafka_bootstrap)
    try:
        dag = build(
            **_spec(j, tmp_path, kafka_bootstrap, f"warm_{j.name}", restart={"hot_standby": True})
        )
        run = run_dag(dag)
    finally:
        v1.wait(60)
    states = task_states(run)
    assert str(run.state) == "success", states
    assert states["submit_standby"] == states["hot_standby"] == "success"
    launched = [a for a in _launches(fake_spark) if "--job-model-version" in a]
    assert len(launched) == 2, launched  # the handover's standby + the hot standby, no submit
    for argv in launched:
        tail = argv[argv.index("--standby") :]
        assert tail[:3] == ["--standby", "--job-model-version", "2"], argv
        # the standby becomes the restarted job: it checks the order too
        assert "--barrier-offsets" in tail and "--on-stale-placement" in tail, argv
    submit = task_instance_xcom(run, "submit")
    assert submit["already_running"], submit  # the standby of v2 takes over: no second launch
    record = j.store.get_expansion(task_instance_xcom(run, "plan")["expansion_id"])
    # the standby was launched while v1 still ran: before the stop step ended
    assert record.steps["standby"].ended_at <= record.steps["stop"].ended_at
    # every step the run went through has a start and an end (the UI shows their durations):
    # the standby step from before its launch, the submit step that launched nothing included
    for name, step in record.steps.items():
        assert step.started_at and step.ended_at and step.started_at <= step.ended_at, name
    assert (
        record.steps["standby"].started_at <= record.results["standby"]["launches"][0]["started_at"]
    )
    assert len(record.results["standby"]["launches"]) == 1
    assert len(record.results["hot_standby"]["launches"]) == 1
    assert task_instance_xcom(run, "ack")["running"]


def test_warm_handover_stops_vn_only_once_the_standby_is_warm(
    job, fake_spark, tmp_path, kafka_bootstrap, run_dag, monkeypatch
):
    """The standby warms up longer than the barrier takes (it is still warming when the stop
    step begins): the stop step waits for its ``standby`` heartbeat before it asks v1 to stop
    (else the job is down for the warm-up)."""
    monkeypatch.setenv("FAKE_SPARK_WARM_UNTIL_STOP", "1")
    j = job(2)
    v1 = _start_v1(j, tmp_path, kafka_bootstrap)
    try:
        run = run_dag(build(**_spec(j, tmp_path, kafka_bootstrap, f"warmwait_{j.name}")))
    finally:
        v1.wait(60)
    assert str(run.state) == "success", task_states(run)
    (warm,) = [json.loads(line) for line in Path(f"{fake_spark}.warm").read_text().splitlines()]
    stop = j.store.stop_request()
    assert stop["version"] == 1, stop
    assert parse_iso(stop["requested_at"]).timestamp() >= warm["warm_at"] - 0.01, (stop, warm)
    result = task_instance_xcom(run, "stop_job")
    assert result["requested"] and result["standby_waited_s"] > 0, result


def test_cold_restart_launches_after_the_write(job, fake_spark, tmp_path, kafka_bootstrap, run_dag):
    j = job(2)
    run = run_dag(
        build(**_spec(j, tmp_path, kafka_bootstrap, f"cold_{j.name}", restart={"restart": "cold"}))
    )
    assert str(run.state) == "success", task_states(run)
    assert "submit_standby" not in task_states(run)
    (argv,) = _launches(fake_spark)
    assert "--standby" not in argv
    assert task_instance_xcom(run, "submit")["detached"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"restart": {"restart": "hot"}}, "restart='hot' is not known - use one of 'auto', "),
        ({"restart": {"hot_standby": True}, "job": {"run_mode": "available-now"}},
         "hot_standby=True needs"),
    ],
)  # fmt: skip
def test_bad_restart_settings_are_refused_at_parse_time(fields, message):
    job = {"name": "j", "topics": "t", "application_args": ["-x"], **fields.pop("job", {})}
    groups = {"job": JobSettings(**job), "restart": RestartSettings(**fields["restart"])}
    with pytest.raises(ValueError, match=message):
        build_expansion_dag("bad", **groups)


def test_available_now_restart_is_cold():
    args = stream_job_args(job_name="j", checkpoint_dir="/c", output_topic="o")  # the shipped
    job = JobSettings(name="j", topics="t", run_mode="available-now", application_args=args)
    dag = build_expansion_dag("an", job=job)
    assert "submit_standby" not in dag.task_ids


class _RunningWatch:
    """Samples the store's processors every 0.1 s: the most live ``running`` processors seen
    at one moment."""

    def __init__(self, config, job_name: str) -> None:
        import threading

        from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

        self.store = KafkaCoordinatorStore(config, job_name)
        self.most = 0
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from airflow_samza_expand.core._liveness import statuses

        while not self.halt.wait(0.1):
            self.store.refresh()
            live = statuses(self.store.processors()).values()
            running = [p for p in live if p.state == "running" and p.alive()]
            self.most = max(self.most, len(running))

    def close(self) -> int:
        self.halt.set()
        self.thread.join(10)
        self.store.close()
        return self.most


def test_a_job_that_cannot_be_a_standby_is_never_run_twice_and_nothing_waits(
    job, fake_spark, tmp_path, kafka_bootstrap, run_dag, monkeypatch
):
    """docs/design.md 'How a restart is chosen': the default restart (``auto``) of an
    application that follows only the five-step protocol is cold: no ``--standby`` launch beside
    the running v1 (before: a second instance on v1, then the stop step waited out
    standby_warm_timeout_s)."""
    monkeypatch.setenv("FAKE_SPARK_NO_STANDBY", "1")
    j = job(2)
    v1 = _start_v1(j, tmp_path, kafka_bootstrap)
    watch = _RunningWatch(j.config, j.name)
    try:
        spec = _spec(
            j, tmp_path, kafka_bootstrap, f"five_{j.name}", restart={"standby_warm_timeout_s": 60}
        )
        run = run_dag(build(**spec))
    finally:
        v1.wait(60)
        most = watch.close()
    assert str(run.state) == "success", task_states(run)
    v1_launch, *launched = _launches(fake_spark)  # v1 itself, then the DAG's launches
    assert "--master" not in v1_launch
    assert len(launched) == 1 and "--standby" not in launched[0], launched  # the submit's
    assert most == 1, f"{most} instances ran at once"
    restart = task_instance_xcom(run, "plan")["restart"]
    assert restart["mode"] == "cold" and restart["requested"] == "auto", restart
    assert "do not advertise the 'standby' capability" in restart["reason"]
    assert task_instance_xcom(run, "submit_standby")["launched"] == 0
    assert task_instance_xcom(run, "stop_job").get("standby_waited_s") is None


def test_an_explicit_warm_handover_of_such_a_job_is_refused_before_anything_changes(
    job, admin, fake_spark, tmp_path, kafka_bootstrap, run_dag, monkeypatch
):
    monkeypatch.setenv("FAKE_SPARK_NO_STANDBY", "1")
    j = job(2)
    v1 = _start_v1(j, tmp_path, kafka_bootstrap)
    try:
        spec = _spec(
            j, tmp_path, kafka_bootstrap, f"fivewarm_{j.name}", restart={"restart": "warm"}
        )
        run = run_dag(build(**spec))
    finally:
        j.store.request_stop(1, "test")
        v1.wait(60)
    states = task_states(run)
    assert states["plan"] == "failed" and states["expand"] == "upstream_failed", states
    assert len(_launches(fake_spark)) == 1  # v1 itself: the DAG launched nothing
    assert j.store.expansions() == []
    assert admin.partition_counts([j.topic]) == {j.topic: 2}


def test_auto_chooses_warm_for_a_job_that_advertises_the_standby_capability(
    job, fake_spark, tmp_path, kafka_bootstrap
):
    from airflow_samza_expand._protocol.restart import choose_restart
    from airflow_samza_expand.core._liveness import statuses

    j = job(2)
    v1 = _start_v1(j, tmp_path, kafka_bootstrap)  # heartbeats as the shipped job's do
    try:
        (status,) = statuses(j.store.processors()).values()
        assert status.can("standby")
        assert choose_restart(j.store.processors(), 1, "auto").restart == "warm"
    finally:
        j.store.request_stop(1, "test")
        v1.wait(60)
