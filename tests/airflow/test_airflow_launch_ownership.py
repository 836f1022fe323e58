"""Airflow launches a job only when the DAG says how (an application it names, a restart task,
or ``stream_job_args`` for the shipped job). A DAG that names none, for a job that is down,
launches nothing, grows nothing and fails naming the job and its last heartbeat; a job that
comes back within the wait lets the plan go on; ``auto`` never takes a launching restart for it;
the DAG built with ``stream_job_args`` still cold-starts the shipped job. Real Kafka, real
Airflow (``dag.test()`` on SQLite); the job is `fake_spark_submit.py`."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import pytest
import test_airflow_ownership as ownership
from airflow.sdk.exceptions import AirflowFailException, TaskDeferred
from airflow_env import first_event, task_context, task_instance_xcom, task_states
from race_dags import build

from airflow_samza_expand._protocol.ownership import give_up
from airflow_samza_expand._protocol.restart import choose_restart
from airflow_samza_expand.airflow._shell import holder_of
from airflow_samza_expand.airflow.operators import PlanExpansionOperator
from airflow_samza_expand.airflow.operators._submit import SubmitStreamJobOperator
from airflow_samza_expand.core._clock import now_iso
from airflow_samza_expand.core._liveness import statuses
from airflow_samza_expand.core.errors import ExpansionError
from airflow_samza_expand.dags import (
    BarrierSettings,
    JobSettings,
    KafkaSettings,
    RestartSettings,
    SparkSettings,
    build_expansion_dag,
    stream_job_args,
)
from airflow_samza_expand.dags._settings import DEFAULT_APPLICATION

fake_spark = ownership.fake_spark  # the fake spark-submit on PATH (fixture)
_launches, _spec, _wait_for = ownership._launches, ownership._spec, ownership._wait_for
USER_ARGS = ["--job-name", "my-job", "--checkpoint-dir", "/checkpoints/my-job"]  # not the shipped
SHIPPED = stream_job_args(job_name="j", checkpoint_dir="/c", output_topic="out")
WAITS = {"barrier": BarrierSettings(producer_refresh_grace_s=0.0), "poll_interval_s": 0.2,
         "kafka": KafkaSettings(check_partitioner=False), "retries": 0,
         "retry_delay": timedelta(seconds=1)}  # fmt: skip


def _dag(dag_id: str, args=USER_ARGS, *, job=None, spark=None, **fields):
    """A factory DAG for job ``j`` on topic ``t`` (or ``job``)."""
    job = job or JobSettings(name="j", topics="t", application_args=args)
    return build_expansion_dag(dag_id, job=job, spark=spark, **fields)


def _crashed(j, pid: str = "proc-1", capabilities=("in-app", "standby")) -> None:
    """The job ran job model v1 (advertising ``capabilities``) and went silent: its processor
    record stays with a heartbeat past its TTL."""
    j.store.heartbeat(pid, 1, "running", ttl_s=0.5, capabilities=list(capabilities))
    _wait_for(
        lambda: j.store.refresh() or not statuses(j.store.processors())[pid].alive(), "silence"
    )


class _Processor:
    """A live processor of the job, heartbeating ``running`` on the newest job model every
    0.2 s (as a job on the runtime does), advertising ``capabilities``."""

    def __init__(self, config, job_name: str, capabilities: list[str]) -> None:
        from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

        self.store = KafkaCoordinatorStore(config, job_name)
        self.capabilities = capabilities
        self.halt = threading.Event()
        self.beat = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.beat.wait(30), "the processor never heartbeat"

    def _run(self) -> None:
        while not self.halt.is_set():
            version = self.store.latest_job_model().version
            self.store.heartbeat("proc-2", version, "running", capabilities=self.capabilities)
            self.beat.set()
            self.halt.wait(0.2)

    def close(self) -> None:
        self.halt.set()
        self.thread.join(10)
        self.store.close()


def _plan(
    j, owns_launch: bool = False, deferrable: bool = True, cls=PlanExpansionOperator, **kwargs
) -> PlanExpansionOperator:
    return cls(
        task_id="plan", job_name=j.name, topics=[j.topic], check_partitioner=False,
        restart="auto", owns_launch=owns_launch, poll_interval_s=0.2, deferrable=deferrable,
        **kwargs,
    )  # fmt: skip


def _nothing_changed(j, admin) -> None:
    lease = j.store.get_lease("expansion")
    assert j.store.expansions() == [] and (lease is None or lease.released), lease
    assert admin.partition_counts([j.topic]) == {j.topic: 2}
    assert [m.version for m in j.store.job_model_history()] == [1]


@pytest.mark.kafka
def test_a_dag_without_an_application_never_launches_a_job_that_is_down_the_shipped_one_does(
    job, admin, fake_spark, tmp_path, kafka_bootstrap, run_dag
):
    j = job(2)
    _crashed(j)  # drained, then crashed: the plan finds no live processor
    dag = _dag(
        f"nolaunch_{j.name}", job=JobSettings(name=j.name, topics=[j.topic],
                                              application_args=USER_ARGS),
        restart=RestartSettings(job_down_timeout_s=1.0), **WAITS,
    )  # fmt: skip
    assert dag.get_task("plan").owns_launch is False
    run = run_dag(dag)

    states = task_states(run)
    assert str(run.state) == "failed", states
    assert states["plan"] == "failed" and states["expand"] == "upstream_failed", states
    assert _launches(fake_spark) == []  # no spark-submit of anything
    _nothing_changed(j, admin)

    # the DAG built for the shipped job (stream_job_args) still cold-starts it when it is down
    shipped = build(**_spec(j, tmp_path, kafka_bootstrap, f"shipped_{j.name}"))
    run = run_dag(shipped)
    assert str(run.state) == "success", task_states(run)
    restart = task_instance_xcom(run, "plan")["restart"]
    assert restart["mode"] == "cold" and restart["requested"] == "auto", restart
    (argv,) = _launches(fake_spark)
    assert DEFAULT_APPLICATION in argv and "--standby" not in argv, argv
    assert admin.partition_counts([j.topic]) == {j.topic: 4}


@pytest.mark.kafka
def test_the_wait_for_a_job_that_is_down_fails_naming_it_or_goes_on_when_it_is_back(job, admin):
    j = job(2)
    _crashed(j)
    context = task_context("plan")
    plan = _plan(j, job_down_timeout_s=0.5)
    with pytest.raises(TaskDeferred) as deferred:
        plan.execute(context)
    _nothing_changed(j, admin)  # it waits having changed nothing (the lease given back)
    event = asyncio.run(first_event(deferred.value.trigger, 30)).payload
    assert event["status"] == "timeout", event
    with pytest.raises(AirflowFailException) as refused:
        plan.execute_job_back(context, event)
    message = str(refused.value)
    assert f"job {j.name!r} stayed down" in message, message
    assert "last heartbeat at " in message, message
    assert "from processor proc-1 (running on job model v1, advertising in-app, standby)" in message
    assert "Nothing was changed" in message and "SparkSettings(application=...)" in message
    assert "RestartSettings(task=...)" in message and "start the job" in message
    _nothing_changed(j, admin)

    plan = _plan(j, job_down_timeout_s=120)
    with pytest.raises(TaskDeferred) as deferred:
        plan.execute(context)
    back = _Processor(j.config, j.name, ["in-app", "standby"])  # the deployment restarted it
    try:
        event = asyncio.run(first_event(deferred.value.trigger, 60)).payload
        assert event["status"] == "running" and event["live"] == ["proc-2"], event
        planned = plan.execute_job_back(context, event)
    finally:
        back.close()
    assert planned["restart"]["mode"] == "in-app", planned  # it launches nothing
    assert j.store.get_expansion(planned["expansion_id"]) is not None


@pytest.mark.kafka
def test_a_dry_run_of_such_a_dag_fails_at_once_naming_the_job(job, admin):
    j = job(2)
    _crashed(j)
    with pytest.raises(AirflowFailException, match=f"JobDownError: job {j.name!r} is down"):
        _plan(j, dry_run=True).execute(task_context("plan"))
    _nothing_changed(j, admin)


@pytest.mark.kafka
def test_such_a_dag_does_not_go_on_with_an_expansion_planned_to_launch(job, admin):
    """Another DAG (one that launches) planned a cold restart and let its lease go: a DAG that
    owns no launch refuses to go on with it (its stop step would stop a job nobody starts)."""
    j = job(2)
    _crashed(j)
    theirs = task_context("plan", dag_id="shipped")
    planned = _plan(j, owns_launch=True).execute(theirs)
    assert planned["restart"]["mode"] == "cold", planned
    give_up(j.store, holder_of(theirs))
    with pytest.raises(AirflowFailException, match="was planned with a cold restart") as refused:
        _plan(j).execute(task_context("plan", dag_id="mine"))
    assert "finish it with a DAG that names how to launch the job" in str(refused.value)
    record = j.store.get_expansion(planned["expansion_id"])
    assert record.owner == holder_of(theirs) and record.status.value == "planned"
    assert admin.partition_counts([j.topic]) == {j.topic: 2}


def _record(pid: str, capabilities: list[str], *, alive: bool = True) -> dict:
    beat = now_iso() if alive else "2026-01-01T00:00:00+00:00"
    return {"job_model_version": 1, "state": "running", "heartbeat_at": beat, "ttl": 30,
            "capabilities": capabilities}  # fmt: skip


def test_auto_never_picks_a_launching_restart_unless_the_dag_owns_launching():
    in_app_gone = {"p1": _record("p1", ["in-app", "standby"], alive=False)}
    assert choose_restart(in_app_gone, 1, "auto").restart == "cold"  # the DAG owns launching
    with pytest.raises(ExpansionError, match="no live processor of job model v1"):
        choose_restart(in_app_gone, 1, "auto", launches=False)
    mixed = {"p1": _record("p1", ["in-place", "standby"]), "p2": _record("p2", ["standby"])}
    assert choose_restart(mixed, 1, "auto").restart == "warm"
    with pytest.raises(ExpansionError, match="p2 advertises standby") as refused:
        choose_restart(mixed, 1, "auto", launches=False)
    assert "can neither switch in place nor restart in-app" in str(refused.value)
    assert "RestartSettings(task=...)" in str(refused.value)
    with pytest.raises(ExpansionError, match="restart='cold' launches the job"):
        choose_restart(mixed, 1, "cold", launches=False)
    every = {"p1": _record("p1", ["in-app", "standby"]), "p2": _record("p2", ["in-app"])}
    assert choose_restart(every, 1, "auto", launches=False).restart == "in-app"
    # a restart task is a way to launch: the user's task is then chosen as before
    assert choose_restart(mixed, 1, "task", launches=False).restart == "task"


def test_the_factory_gives_the_shipped_job_only_to_a_dag_built_for_it():
    shipped = _dag("s", SHIPPED)
    assert shipped.get_task("submit").application == DEFAULT_APPLICATION
    assert shipped.get_task("plan").owns_launch is True
    assert "submit_standby" in shipped.task_ids  # auto may choose warm
    extended = _dag("e", SHIPPED + ["--x"])
    assert extended.get_task("submit").application == DEFAULT_APPLICATION

    own = _dag("o")
    assert own.get_task("submit").application == ""  # it launches nothing
    assert own.get_task("plan").owns_launch is False
    assert "submit_standby" not in own.task_ids  # auto takes in place or in-app only
    named = _dag("n", spark=SparkSettings(application="/opt/jobs/my_job.py"))
    assert named.get_task("submit").application == "/opt/jobs/my_job.py"
    assert named.get_task("plan").owns_launch is True

    available_now = JobSettings(name="j", topics="t", application_args=USER_ARGS,
                                run_mode="available-now")  # fmt: skip
    for fields, what in [
        ({"restart": RestartSettings(restart="cold")}, "restart='cold' launches the job"),
        ({"restart": RestartSettings(restart="warm")}, "restart='warm' launches the job"),
        ({"restart": RestartSettings(hot_standby=True)}, "hot_standby=True launches a"),
        ({"job": available_now}, "runs the job from the DAG"),
    ]:
        with pytest.raises(ValueError, match=what) as refused:
            _dag("x", **fields)
        assert "SparkSettings(application=...)" in str(refused.value)
    # each job of a multi-job DAG by its own arguments
    per_job = {"a": {"job": {"application_args": SHIPPED}},
               "b": {"job": {"application_args": USER_ARGS}}}  # fmt: skip
    multi = _dag("m", job=JobSettings(jobs=["a", "b"], topics="t", per_job=per_job))
    assert multi.get_task("a.submit").application == DEFAULT_APPLICATION
    assert multi.get_task("b.submit").application == ""
    assert multi.get_task("b.plan").owns_launch is False


@pytest.mark.kafka
def test_a_submit_step_without_an_application_launches_nothing(fake_spark):
    submit = SubmitStreamJobOperator(task_id="submit", application="", application_args=USER_ARGS)
    with pytest.raises(AirflowFailException, match="names no application, so it launches"):
        submit.execute(task_context("submit"))
    assert _launches(fake_spark) == []
