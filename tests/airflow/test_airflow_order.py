"""The proof of order (docs/design.md 'Stale placements') on the Airflow surface: the factory
turns the restarted job's order check on (``--barrier-offsets auto --on-stale-placement``), the
barrier sensor/trigger take ``stale_quiet_s`` and hold/refuse by it up to their deadline, and the
report step fails with ``on_stale_placement="fail"`` when a record was placed stale after the
snapshot. (tests/e2e/test_e2e_order.py runs the same with the real job and live producers.)"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
import time
from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import AirflowFailException
from airflow_env import first_event, task_context
from confluent_kafka import Producer
from kafka_helpers import produce_keyed
from test_airflow_barrier import plan_and_expand

from airflow_samza_expand._kafka.partitioners import crc32_partition
from airflow_samza_expand._protocol.barrier import step as barrier
from airflow_samza_expand.airflow._order import order_refusal, with_order_check
from airflow_samza_expand.airflow.operators._report import ExpansionReportOperator
from airflow_samza_expand.airflow.operators._submit import SubmitStreamJobOperator
from airflow_samza_expand.airflow.sensors import OrderingBarrierSensor
from airflow_samza_expand.airflow.triggers import OrderingBarrierTrigger
from airflow_samza_expand.dags import (
    BarrierSettings,
    JobSettings,
    RestartSettings,
    SparkSettings,
    build_expansion_dag,
    stream_job_args,
)
from airflow_samza_expand.dags._settings import DEFAULT_APPLICATION

# the shipped job's (a DAG built with stream_job_args launches the shipped job)
ARGS = stream_job_args(job_name="j", checkpoint_dir="/c", output_topic="out")
JOB = JobSettings(name="j", topics="t", application_args=ARGS)


def _moved_key(old: int, new: int, prefix: str = "late") -> tuple[str, int]:
    """A key and its old-count partition, where the key belongs elsewhere at ``new``."""
    for i in range(1000):
        key = f"{prefix}-{i}".encode()
        p = crc32_partition(key, old)
        if crc32_partition(key, new) != p:
            return key.decode(), p
    raise AssertionError("no moved key")


def _produce_to(config, topic: str, key: str, partition: int) -> None:
    producer = Producer({**config, "linger.ms": 0})
    producer.produce(topic, key=key.encode(), value=b"{}", partition=partition)
    assert producer.flush(30) == 0


# -- the job's arguments and the settings -----------------------------------------------------


def test_order_check_flags_are_added_once_and_the_users_own_win() -> None:
    assert with_order_check(ARGS, "fail") == [
        *ARGS, "--barrier-offsets", "auto", "--on-stale-placement", "fail",
    ]  # fmt: skip
    own = [*ARGS, "--barrier-offsets", '{"t": {"0": 3}}', "--on-stale-placement=warn"]
    assert with_order_check(own, "fail") == own
    once = with_order_check(ARGS, "warn")
    assert with_order_check(once, "warn") == once
    templated = with_order_check(ARGS, "{{ params.on_stale_placement }}")
    assert templated[-1] == "{{ params.on_stale_placement }}"
    with pytest.raises(AirflowFailException, match="'warn'.*'fail'"):
        with_order_check(ARGS, "ignore")


@pytest.mark.parametrize(
    ("field", "value", "error", "match"),
    [
        ("on_stale_placement", "stop", ValueError,
         "on_stale_placement='stop' is not known - use one of 'warn', 'fail'"),
        ("stale_quiet_s", -1, AirflowFailException,
         "stale_quiet_s=-1 must be a number of seconds >= 0"),
        ("stale_quiet_s", "soon", AirflowFailException, "stale_quiet_s='soon'"),
    ],
)  # fmt: skip
def test_bad_order_settings_fail_when_the_dag_is_parsed(field, value, error, match) -> None:
    with pytest.raises(error, match=match):
        build_expansion_dag("d", job=JOB, barrier=BarrierSettings(**{field: value}))


def test_the_factory_wires_the_order_check_into_submit_barrier_and_report() -> None:
    dag = build_expansion_dag(
        "d", job=JOB,
        barrier=BarrierSettings(on_stale_placement="fail", stale_quiet_s="{{ params.quiet }}"),
    )  # fmt: skip
    assert dag.task_dict["submit"].on_stale_placement == "fail"
    assert dag.task_dict["submit"].application_args == ARGS  # the user's args untouched
    # in a warm restart (auto may choose it) the standby becomes the restarted job: same check
    assert dag.task_dict["submit_standby"].on_stale_placement == "fail"
    hot = build_expansion_dag("d4", job=JOB, restart=RestartSettings(hot_standby=True))
    assert hot.task_dict["hot_standby"].on_stale_placement == "warn"
    assert dag.task_dict["barrier"].stale_quiet_s == "{{ params.quiet }}"
    assert dag.task_dict["report"].on_stale_placement == "fail"
    default = build_expansion_dag("d2", job=JOB)
    assert default.task_dict["submit"].on_stale_placement == "warn"
    assert default.task_dict["barrier"].stale_quiet_s is None
    own_app = build_expansion_dag("d3", job=JOB, spark=SparkSettings(application="/opt/my_job.py"))
    assert own_app.task_dict["submit"].on_stale_placement is None  # its flags are its own
    assert DEFAULT_APPLICATION.endswith("job.py")


def test_submit_passes_the_order_flags_to_spark_submit(tmp_path, monkeypatch) -> None:
    argv_file = tmp_path / "argv.json"
    script = tmp_path / "spark-submit"
    script.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"json.dump(sys.argv[1:], open({str(argv_file)!r}, 'w'))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local"})
    )
    SubmitStreamJobOperator(
        task_id="submit", application="job.py", run_mode="available-now",
        application_args=ARGS, on_stale_placement="fail",
    ).execute(task_context("submit"))  # fmt: skip
    argv = json.loads(argv_file.read_text())
    tail = argv[argv.index("job.py") + 1 :]
    assert tail == [*ARGS, "--barrier-offsets", "auto", "--on-stale-placement", "fail"]


# -- the barrier ------------------------------------------------------------------------------


def test_barrier_trigger_serializes_its_quiet_window_and_deadline() -> None:
    from airflow.sdk._shared.module_loading import import_string

    trigger = OrderingBarrierTrigger(
        job_name="j", expansion_id="e", stale_quiet_s=2.5, deadline=1.7e9
    )
    classpath, kwargs = trigger.serialize()
    assert kwargs["stale_quiet_s"] == 2.5 and kwargs["deadline"] == 1.7e9
    assert import_string(classpath)(**kwargs).stale_quiet_s == 2.5


def test_barrier_refuses_at_its_deadline_naming_stale_placements(job) -> None:
    """Quiet window 60 s, deadline 3 s: a stale placement after the growth keeps the barrier
    from snapshotting, and at the deadline it refuses naming them (without the quiet window
    it would snapshot at once and time out on the lag; without the deadline passed to the
    poll, it would time out on the lag too)."""
    j = job(2)
    produce_keyed(j.config, j.topic, 10)
    expansion_id = plan_and_expand(j, 4)
    key, partition = _moved_key(2, 4)
    _produce_to(j.config, j.topic, key, partition)
    trigger = OrderingBarrierTrigger(
        job_name=j.name, expansion_id=expansion_id, producer_refresh_grace_s=0,
        stale_quiet_s=60.0, deadline=time.time() + 3.0, poll_interval_s=0.3,
    )  # fmt: skip
    event = asyncio.run(first_event(trigger, 60)).payload
    assert event["status"] == "refused", event
    assert "BarrierTimeoutError" in event["error"] and "stale placements" in event["error"]
    record = j.store.get_expansion(expansion_id)
    assert not record.barrier  # no snapshot while stale placements were not quiet
    assert record.stale_placements["before_snapshot"]["records"] == 1
    sensor = OrderingBarrierSensor(task_id="b", job_name=j.name, expansion_id=expansion_id)
    with pytest.raises(AirflowFailException, match="stale placements still arriving"):
        sensor.execute_complete(task_context(), event)


# -- the report -------------------------------------------------------------------------------


def _report_context(plan_xcom: dict, pushed: dict) -> dict:
    xcoms = {"plan": plan_xcom, "write": {"version": 2}, "submit": {"mode": "continuous"}}
    ti = SimpleNamespace(
        dag_id="expansion_test", task_id="report", run_id="manual__test", try_number=1,
        xcom_pull=lambda task_ids: xcoms.get(task_ids),
        xcom_push=lambda key, value: pushed.__setitem__(key, value),
    )  # fmt: skip
    return {"ti": ti}


def _report(j, expansion_id: str, on_stale: str, pushed: dict):
    plan_xcom = {
        "expansion_id": expansion_id,
        "plan": dict(j.store.get_expansion(expansion_id).plan),
    }
    return ExpansionReportOperator(
        task_id="report", job_name=j.name, expansion_id=expansion_id, run_mode="continuous",
        on_stale_placement=on_stale, task_ids={k: k for k in ("plan", "write", "submit")},
    ).execute(_report_context(plan_xcom, pushed))  # fmt: skip


def _steps_done_up_to_the_report(j, expansion_id: str) -> None:
    """The barrier passed, the job stopped, v2 written: what the DAG's steps do before the
    report (the report completes the record only from there)."""
    from airflow_samza_expand._protocol import records
    from airflow_samza_expand.core._plan import plan_expansion
    from airflow_samza_expand.core._record import ExpansionStatus as S

    v1 = j.store.latest_job_model()
    j.store.write_job_model(plan_expansion(v1, {j.topic: 4}, {j.topic: 4}).new_job_model)
    for status in (S.BARRIER_PASSED, S.JOB_STOPPED, S.JOB_MODEL_WRITTEN):
        records.update(j.store, expansion_id, lambda r, s=status: r.advance(s))


def test_report_fails_a_run_whose_record_never_got_past_planned(job) -> None:
    """Green means done: a record left at ``planned`` with nothing grown (by hand here; an
    earlier version left two-stream expansions so) fails the report, naming the status it
    asked for, instead of ending green with nothing changed."""
    from airflow_samza_expand._kafka.admin import KafkaAdmin
    from airflow_samza_expand._protocol.ownership import airflow_holder
    from airflow_samza_expand._protocol.steps.plan.step import PlanRequest, plan

    j = job(2)
    with KafkaAdmin(j.config) as admin:  # planned by the run the report belongs to
        planned = plan(
            j.store, admin,
            PlanRequest(job_name=j.name, topics=(j.topic,), check_partitioner=False),
            airflow_holder("expansion_test", "manual__test"),
        )  # fmt: skip
    with pytest.raises(AirflowFailException, match="'planned'.*'completed'|'completed'.*'planned'"):
        _report(j, planned.expansion_id, "warn", {})
    assert j.store.get_expansion(planned.expansion_id).status.value == "planned"


def test_report_names_a_key_placed_stale_after_the_snapshot_and_fails_with_fail(job) -> None:
    j = job(2)
    produce_keyed(j.config, j.topic, 20)
    expansion_id = plan_and_expand(j, 4)
    from airflow_samza_expand._kafka.admin import KafkaAdmin

    with KafkaAdmin(j.config) as admin:
        snap = barrier.snapshot_poll(
            admin, j.store, expansion_id=expansion_id, group=j.name, grace_ends=0.0,
            stale_quiet_s=0.0,
        )  # fmt: skip
    assert snap.done
    _steps_done_up_to_the_report(j, expansion_id)
    proven = _report(j, expansion_id, "fail", {})
    assert proven["order"]["order"] == "proven"
    assert proven["order"]["line"].startswith("order: proven (0 stale placements after")
    key, partition = _moved_key(2, 4)
    _produce_to(j.config, j.topic, key, partition)  # after the snapshot, by hand
    warned = _report(j, expansion_id, "warn", {})
    assert warned["order"]["order"] == "at risk"
    assert warned["order"]["line"].startswith("order: at risk - 1 records of 1 keys")
    assert key in warned["order"]["line"]
    pushed: dict = {}
    with pytest.raises(AirflowFailException, match=f"order at risk.*'{key}'"):
        _report(j, expansion_id, "fail", pushed)
    assert pushed["summary"]["order"]["keys_at_risk"] == [{"key": key, "records": 1}]


def test_order_refusal_only_for_fail_and_at_risk() -> None:
    at_risk = {"order": "at risk", "line": "order: at risk - 1 records of 1 keys",
               "keys_at_risk": [{"key": "k-1", "records": 1}]}  # fmt: skip
    assert order_refusal(at_risk, "warn") is None
    assert order_refusal({"order": "proven", "line": "order: proven"}, "fail") is None
    assert order_refusal(None, "fail") is None
    assert "'k-1'" in order_refusal(at_risk, "fail")
