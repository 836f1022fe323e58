"""DAG integrity: every file in dags/ imports cleanly (DagBag, no import errors), the expected DAG
ids and task chains, the trigger form's Params, max_active_runs=1, retries only where a retry
helps, serialization, and the factory's run modes and task group. Import times are measured and
printed (one fresh interpreter for all files), never asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "airflow"))
import airflow_env  # noqa: E402,I001 - sets a temporary AIRFLOW_HOME before airflow is imported

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DAGS_DIR = REPO / "dags"
CHAIN = ["plan", "expand", "barrier", "stop_job", "write_job_model", "submit", "ack", "report"]
STANDBY_TASKS = ("submit_standby", "hot_standby")  # branches beside the chain (handover)
EXPECTED = {
    "samza_expand": CHAIN,
    "samza_expand_on_partition_change": CHAIN,
    "samza_expand_on_schedule": CHAIN,
    "samza_expand_user_job": CHAIN,
}


@pytest.fixture(scope="module")
def dagbag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS_DIR), bundle_path=DAGS_DIR)


def _downstream_chain(dag) -> list[str]:
    """Task ids in chain order from the single root (fails if the DAG is not a chain)."""
    roots = [t for t in dag.tasks if not t.upstream_list]
    assert len(roots) == 1, [t.task_id for t in roots]
    order, task = [], roots[0]
    while True:
        order.append(task.task_id)
        nxt = [t for t in task.downstream_list if t.task_id not in STANDBY_TASKS]
        if not nxt:
            return order
        assert len(nxt) == 1, f"{task.task_id} fans out to {[t.task_id for t in nxt]}"
        task = nxt[0]


def test_every_dag_file_imports_without_errors(dagbag) -> None:
    assert dagbag.import_errors == {}
    files = sorted(p.name for p in DAGS_DIR.glob("*.py"))
    assert files == [
        "samza_expand.py",
        "samza_expand_on_partition_change.py",
        "samza_expand_on_schedule.py",
        "samza_expand_user_job.py",
    ]
    assert set(dagbag.dag_ids) == set(EXPECTED)


@pytest.fixture(scope="module")
def import_times() -> dict[str, tuple[float, str]]:
    """One fresh interpreter (what a DAG processor pays, Airflow's import included once)
    imports each DAG file in turn: file name -> (seconds, dag id)."""
    code = (
        "import importlib.util, json, sys, time\n"
        "out = {}\n"
        "for path in sys.argv[1:]:\n"
        "    t = time.perf_counter()\n"
        "    spec = importlib.util.spec_from_file_location('m', path)\n"
        "    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "    out[path.rsplit('/', 1)[-1]] = [time.perf_counter() - t, m.dag.dag_id]\n"
        "print(json.dumps(out))\n"
    )
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code, *map(str, sorted(DAGS_DIR.glob("*.py")))],
        env={**os.environ, "AIRFLOW_HOME": str(airflow_env.AIRFLOW_HOME)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    print(f"\nDAG files imported in one interpreter: {time.perf_counter() - started:.2f}s in all")
    return {name: (float(t), dag_id) for name, (t, dag_id) in json.loads(done.stdout).items()}


@pytest.mark.parametrize("path", sorted(DAGS_DIR.glob("*.py")), ids=lambda p: p.name)
def test_dag_file_import_time_is_measured(path: Path, import_times) -> None:
    """Each file imports in a fresh interpreter and builds its DAG; the time is printed (the
    first file's includes Airflow's own import), never asserted."""
    seconds, dag_id = import_times[path.name]
    assert dag_id in EXPECTED
    print(f"\n{path.name}: module import {seconds:.2f}s")


@pytest.mark.parametrize("dag_id", sorted(EXPECTED))
def test_dags_are_the_expansion_chain(dagbag, dag_id: str) -> None:
    dag = dagbag.dags[dag_id]
    assert _downstream_chain(dag) == EXPECTED[dag_id]
    # the default restart may be warm: the vN+1 standby starts during the grace, before
    # the stop (_protocol.restart.warm)
    standby = dag.task_dict["submit_standby"]
    assert standby.upstream_task_ids == {"expand"}
    assert standby.downstream_task_ids == {"stop_job"}
    assert dag.max_active_runs == 1
    tasks = dag.task_dict
    # Refusals fail without retry inside the operators; transient steps retry; so does the
    # continuous submit: its retry launches again only once the record's launch is gone.
    for step in ("plan", "expand", "barrier", "stop_job", "write_job_model", "submit", "ack"):
        assert tasks[step].retries >= 1, step
    assert tasks["report"].trigger_rule == "none_failed"
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    assert isinstance(tasks["submit"], SparkSubmitOperator)


def test_trigger_form_params(dagbag) -> None:
    dag = dagbag.dags["samza_expand"]
    params = dag.params
    assert set(params.keys()) == {
        "topic",
        "factor",
        "job_name",
        "grace_seconds",
        "barrier_timeout_seconds",
        "dry_run",
        "other_jobs",
        "on_stale_placement",
    }
    factor = params.get_param("factor")
    assert factor.schema["enum"] == [2, 4, 8, 16]
    assert params.get_param("dry_run").schema["type"] == "boolean"
    from airflow.sdk.definitions.param import ParamValidationError

    with pytest.raises(ParamValidationError):
        factor.resolve(3)
    assert params.validate() == {
        "topic": "orders",
        "factor": 2,
        "job_name": "orders-counter",
        "grace_seconds": 300,
        "barrier_timeout_seconds": 3600,
        "dry_run": False,
        "other_jobs": "refuse",
        "on_stale_placement": "warn",
    }
    # Params reach the steps through templates (grace and timeout included).
    barrier = dag.task_dict["barrier"]
    assert barrier.producer_refresh_grace_s == "{{ params.grace_seconds }}"
    assert "producer_refresh_grace_s" in barrier.template_fields
    # the order check: the form's choice reaches the job's flags (submit) and the report's verdict
    assert params.get_param("on_stale_placement").schema["enum"] == ["warn", "fail"]
    for step in ("submit", "report"):
        task = dag.task_dict[step]
        assert task.on_stale_placement == "{{ params.on_stale_placement }}"
        assert "on_stale_placement" in task.template_fields


def test_event_driven_dag_is_scheduled_by_a_partition_count_watcher(dagbag) -> None:
    from airflow.serialization.serialized_objects import DagSerialization

    dag = dagbag.dags["samza_expand_on_partition_change"]
    text = str(DagSerialization.to_dict(dag))
    assert "PartitionCountChangeTrigger" in text
    assert dag.task_dict["plan"].follow_live_counts is True


def test_scheduled_dag_grows_by_policy_not_by_calendar(dagbag) -> None:
    from airflow_samza_expand.core.policy import GrowthPolicy

    dag = dagbag.dags["samza_expand_on_schedule"]
    assert dag.schedule == "@hourly"
    policy = dag.task_dict["plan"].policy
    assert isinstance(policy, GrowthPolicy)
    assert policy.max_partition_bytes == 2**30 and policy.max_factor == 4


@pytest.mark.parametrize("dag_id", sorted(EXPECTED))
def test_dags_serialize_round_trip(dagbag, dag_id: str) -> None:
    from airflow.serialization.serialized_objects import DagSerialization

    dag = dagbag.dags[dag_id]
    again = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    assert set(again.task_ids) == set(dag.task_ids)
    assert again.max_active_runs == dag.max_active_runs
    assert set(again.params.keys()) == set(dag.params.keys())
    for task in dag.tasks:
        back = again.task_dict[task.task_id]
        # what the scheduler and the worker rebuild the task from: class, wiring, retry policy
        assert (back.task_type, back._task_module) == (
            type(task).__name__,
            type(task).__module__,
        ), task.task_id
        assert back.upstream_task_ids == task.upstream_task_ids, task.task_id
        assert back.downstream_task_ids == task.downstream_task_ids, task.task_id
        assert (back.retries, back.trigger_rule) == (task.retries, task.trigger_rule), task.task_id
        assert back.retry_delay == task.retry_delay, task.task_id
        # the key arguments are the templated ones (job, topics, grace, XCom pulls, spark args)
        assert task.template_fields, task.task_id
        for field in task.template_fields:
            assert getattr(back, field) == getattr(task, field), f"{task.task_id}.{field}"


def _factory_dag(topics, run_mode="continuous", **kwargs):
    from airflow_samza_expand.dags import JobSettings, build_expansion_dag, stream_job_args

    args = stream_job_args(
        job_name="j", bootstrap_servers="b:9092", checkpoint_dir="/c", output_topic="out"
    )
    job = JobSettings(name="j", topics=topics, run_mode=run_mode, application_args=args)
    return build_expansion_dag("f", job=job, **kwargs)


def test_available_now_mode_drains_between_snapshot_and_barrier() -> None:
    dag = _factory_dag(topics=["orders"], run_mode="available-now")
    assert _downstream_chain(dag) == [
        "plan",
        "expand",
        "barrier_snapshot",
        "drain",
        "barrier",
        "stop_job",
        "write_job_model",
        "submit",
        "ack",
        "report",
    ]
    tasks = dag.task_dict
    for task_id in ("drain", "submit"):
        args = tasks[task_id].application_args
        assert args[args.index("--trigger") + 1] == "available-now", task_id
    assert tasks["submit"].run_mode == "available-now"
    assert tasks["ack"].accept_stopped is True
    assert tasks["barrier_snapshot"].mode == "reschedule"


def test_multi_topic_expand_and_task_group() -> None:
    from airflow.sdk import DAG

    from airflow_samza_expand.dags import (
        GrowthSettings,
        JobSettings,
        expansion_task_group,
        stream_job_args,
    )

    dag = _factory_dag(["a", "b"], growth=GrowthSettings(targets={"a": 4, "b": 8}))
    assert {"expand_a", "expand_b"} <= set(dag.task_ids)
    assert dag.task_dict["expand_b"].target_partitions == 8
    with DAG("embedding", schedule=None) as outer:
        group = expansion_task_group(
            group_id="grow",
            job=JobSettings(
                name="j",
                topics="orders",
                application_args=stream_job_args(
                    job_name="j", checkpoint_dir="/c", output_topic="o", bootstrap_servers="b:1"
                ),
            ),
        )
    assert group.group_id == "grow"
    assert {f"grow.{step}" for step in (*CHAIN, "submit_standby")} == set(outer.task_ids)
    # XCom pulls name the grouped task ids.
    assert "grow.plan" in outer.task_dict["grow.barrier"].expansion_id


def test_bad_run_mode_is_refused_with_the_fix() -> None:
    choices = "'continuous', 'available-now'"
    with pytest.raises(ValueError, match=f"run_mode='forever' is not known - use one of {choices}"):
        _factory_dag(topics="orders", run_mode="forever")


def test_continuous_submit_never_waits_for_app_completion() -> None:
    from airflow_samza_expand.airflow.operators._submit import (
        WAIT_APP_COMPLETION_CONFS,
        detached_conf,
    )

    conf = detached_conf({"spark.yarn.submit.waitAppCompletion": "true", "x": "1"})
    assert conf["x"] == "1"
    assert conf["spark.yarn.submit.waitAppCompletion"] == "true"  # an explicit value wins
    others = [k for k in WAIT_APP_COMPLETION_CONFS if k != "spark.yarn.submit.waitAppCompletion"]
    assert others and all(conf[k] == "false" for k in others)
    assert detached_conf(None) == dict.fromkeys(WAIT_APP_COMPLETION_CONFS, "false")


def test_stream_job_args_leave_the_output_topic_out_for_a_job_writing_elsewhere() -> None:
    from airflow_samza_expand.dags import stream_job_args

    table_job = stream_job_args(job_name="j", checkpoint_dir="/c", bootstrap_servers="b:9092")
    assert "--output-topic" not in table_job
    assert table_job[:4] == ["--job-name", "j", "--coordinator", "kafka"]
    shipped = stream_job_args(job_name="j", checkpoint_dir="/c", output_topic="out")
    assert shipped[shipped.index("--output-topic") + 1] == "out"


def test_stream_job_args_pass_the_jobs_consumer_group_to_the_job() -> None:
    """A job moved onto the runtime keeps committing to the group it used (``--consumer-group``:
    the runtime's flag; without it the job name)."""
    from airflow_samza_expand.dags import stream_job_args
    from airflow_samza_expand.spark._args import parse_args

    args = stream_job_args(job_name="j", checkpoint_dir="/c", consumer_group="orders-app")
    assert args[args.index("--consumer-group") + 1] == "orders-app"
    assert parse_args(args, {})[0].consumer_group == "orders-app"
    assert "--consumer-group" not in stream_job_args(job_name="j", checkpoint_dir="/c")
