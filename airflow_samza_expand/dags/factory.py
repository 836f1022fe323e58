"""The expansion DAG factory.

``build_expansion_dag(...)`` returns a DAG, ``expansion_task_group(...)`` the same chain as a
TaskGroup for a DAG of your own::

    plan -> expand -> ordering barrier -> stop job -> write job model vN+1
         -> submit restarted job (SparkSubmitOperator) -> wait for acknowledgement -> report

Run modes of the stateful job (``run_mode``):

* ``"continuous"``: the job runs all the time. The barrier waits for the running job to drain
  the old partitions; the submit step returns as soon as the restarted job runs (detached
  launch on a local master, ``waitAppCompletion=false`` on a cluster) and the acknowledgement
  sensor (deferrable) confirms it runs job model vN+1.
* ``"available-now"``: the job runs in scheduled runs that end. After the producer refresh
  grace the barrier snapshot is taken, then a *drain* run of the job on the current job model
  reads up to it (``drain``), the barrier holds, the stop step finds nothing running, and the
  submit step is a plain ``SparkSubmitOperator`` run on vN+1 that ends; the acknowledgement
  accepts a clean ``stopped`` on vN+1.

Every numeric/boolean argument that users may want in a trigger form (factor, grace, barrier
timeout, dry run) may be a Jinja template such as ``"{{ params.factor }}"``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, BaseOperator, TaskGroup, chain

from airflow_samza_expand.airflow.operators.write_model import WriteJobModelOperator
from airflow_samza_expand.dags.steps import (
    AckStepSensor,
    BarrierSnapshotSensor,
    BarrierStepSensor,
    ExpandStepOperator,
    ExpansionReportOperator,
    ResumablePlanOperator,
    StopStepOperator,
    SubmitStepOperator,
)
from airflow_samza_expand.dags.submit import SubmitStreamJobOperator, normalise_run_mode

DEFAULT_APPLICATION = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "spark", "job.py"
)
DEFAULT_DESCRIPTION = (
    "Expand the Kafka input topics of a live stateful job (SEP-5 mapping + ordering barrier)"
)
STEP_TASK_IDS = ("plan", "expand", "barrier", "stop_job", "write_job_model", "submit", "ack")


def stream_job_args(
    *,
    job_name: str,
    checkpoint_dir: str,
    output_topic: str,
    bootstrap_servers: str | None = None,
    kafka_config_file: str | None = None,
    coordinator: str = "kafka",
    trigger: str = "processing-time=5s",
    extra: Sequence[str] = (),
) -> list[str]:
    """``application_args`` of the shipped PySpark job (``airflow_samza_expand/spark/job.py``)."""
    args = ["--job-name", job_name, "--coordinator", coordinator]
    if bootstrap_servers:
        args += ["--bootstrap-servers", bootstrap_servers]
    if kafka_config_file:
        args += ["--kafka-config", kafka_config_file]
    args += ["--checkpoint-dir", checkpoint_dir, "--output-topic", output_topic]
    args += ["--trigger", trigger, *extra]
    return args


def _with_trigger(args: Sequence[str], trigger: str) -> list[str]:
    """``args`` with its ``--trigger`` value replaced (or added)."""
    out = list(args)
    if "--trigger" in out:
        i = out.index("--trigger")
        out[i + 1 : i + 2] = [trigger]
    else:
        out += ["--trigger", trigger]
    return out


def _is_template(value: Any) -> bool:
    return isinstance(value, str) and "{{" in value


def _add_chain(
    *,
    prefix: str,
    job_name: str,
    topics: str | Sequence[str],
    factor: int | str,
    targets: Mapping[str, int] | None,
    follow_live_counts: bool,
    run_mode: str,
    kafka_conn_id: str,
    spark_conn_id: str,
    application: str,
    application_args: Sequence[str],
    drain_application_args: Sequence[str] | None,
    spark_conf: Mapping[str, Any] | None,
    spark_env_vars: Mapping[str, Any] | None,
    spark_submit_kwargs: Mapping[str, Any] | None,
    coordinator: str,
    consumer_group: str | None,
    producer_refresh_grace_s: float | str,
    barrier_timeout_s: float | str,
    stop_timeout_s: float,
    ack_timeout_s: float,
    poll_interval_s: float,
    dry_run: bool | str,
    check_partitioner: bool,
    write_job_model_operator: type[BaseOperator],
    retries: int,
    retry_delay: timedelta,
    log_dir: str | None,
) -> tuple[BaseOperator, BaseOperator]:
    mode = normalise_run_mode(run_mode)
    if mode == "available-now" and application == DEFAULT_APPLICATION:
        application_args = _with_trigger(application_args, "available-now")
        if drain_application_args is not None:
            drain_application_args = _with_trigger(drain_application_args, "available-now")
    topic_list = [topics] if isinstance(topics, str) else list(topics)
    if not topic_list:
        raise ValueError("topics is empty - name the input topic(s) to expand")
    # Task ids as created (a TaskGroup adds its prefix itself) and as XCom pulls name them.
    names = {step: step for step in (*STEP_TASK_IDS, "barrier_snapshot", "drain", "report")}
    ids = {step: f"{prefix}{step}" for step in names}
    expansion_id = "{{ ti.xcom_pull(task_ids='" + ids["plan"] + "')['expansion_id'] }}"
    common = {"coordinator": coordinator, "kafka_config_id": kafka_conn_id}
    retrying = {"retries": retries, "retry_delay": retry_delay}
    spark = {
        "conn_id": spark_conn_id,
        "application": application,
        "conf": dict(spark_conf or {}),
        "env_vars": dict(spark_env_vars or {}),
        "name": f"samza-expand-{job_name}" if not _is_template(job_name) else "samza-expand-job",
        **dict(spark_submit_kwargs or {}),
    }

    plan_kwargs: dict[str, Any] = {"targets": dict(targets)} if targets else {"topics": topics}
    plan = ResumablePlanOperator(
        task_id=names["plan"],
        job_name=job_name,
        factor=factor,
        check_partitioner=check_partitioner,
        follow_live_counts=follow_live_counts,
        consumer_group=consumer_group,
        **plan_kwargs,
        **common,
        **retrying,
    )

    expand_tasks: list[BaseOperator] = []
    for topic in topic_list:
        task_id = names["expand"] if len(topic_list) == 1 else f"{names['expand']}_{topic}"
        if targets and topic in targets:
            size: dict[str, Any] = {"target_partitions": targets[topic]}
        elif not _is_template(topic):
            size = {
                "target_partitions": "{{ ti.xcom_pull(task_ids='"
                + ids["plan"]
                + "')['plan']['counts_after']['"
                + topic
                + "'] }}"
            }
        else:
            size = {"factor": factor}
        expand_tasks.append(
            ExpandStepOperator(
                task_id=task_id,
                topic=topic,
                job_name=job_name,
                expansion_id=expansion_id,
                dry_run=dry_run,
                **size,
                **common,
                **retrying,
            )
        )

    barrier_kwargs = {
        "job_name": job_name,
        "expansion_id": expansion_id,
        "consumer_group": consumer_group,
        "producer_refresh_grace_s": producer_refresh_grace_s,
        "barrier_timeout_s": barrier_timeout_s,
        "poke_interval": poll_interval_s,
        **common,
    }
    pre_barrier: list[BaseOperator] = []
    if mode == "available-now":
        snapshot = BarrierSnapshotSensor(
            task_id=names["barrier_snapshot"], mode="reschedule", **barrier_kwargs, **retrying
        )
        drain = SubmitStreamJobOperator(
            task_id=names["drain"],
            run_mode="available-now",
            application_args=list(drain_application_args or application_args),
            **spark,
            **retrying,
        )
        pre_barrier = [snapshot, drain]
    barrier = BarrierStepSensor(
        task_id=names["barrier"], deferrable=mode == "continuous", **barrier_kwargs, **retrying
    )
    stop = StopStepOperator(
        task_id=names["stop_job"],
        job_name=job_name,
        expansion_id=expansion_id,
        reason="partition expansion {{ ti.xcom_pull(task_ids='"
        + ids["plan"]
        + "')['expansion_id'] }}",
        poll_interval_s=min(poll_interval_s, 5.0),
        stop_timeout_s=stop_timeout_s,
        **common,
        **retrying,
    )
    write = write_job_model_operator(
        task_id=names["write_job_model"],
        job_name=job_name,
        expansion_id=expansion_id,
        **common,
        **retrying,
    )
    submit = SubmitStepOperator(
        task_id=names["submit"],
        run_mode=mode,
        job_name=job_name,
        expansion_id=expansion_id,
        application_args=list(application_args),
        log_dir=log_dir,
        retries=0 if mode == "continuous" else retries,  # a second launch would run the job twice
        retry_delay=retry_delay,
        **spark,
        **common,
    )
    ack = AckStepSensor(
        task_id=names["ack"],
        job_name=job_name,
        expansion_id=expansion_id,
        version="{{ ti.xcom_pull(task_ids='" + ids["write_job_model"] + "')['version'] }}",
        accept_stopped=mode == "available-now",
        poke_interval=min(poll_interval_s, 5.0),
        timeout=ack_timeout_s,
        **common,
        **retrying,
    )
    report = ExpansionReportOperator(
        task_id=names["report"],
        job_name=job_name,
        expansion_id=expansion_id,
        run_mode=mode,
        task_ids={
            "plan": ids["plan"],
            "barrier": ids["barrier"],
            "stop": ids["stop_job"],
            "write": ids["write_job_model"],
            "submit": ids["submit"],
            "ack": ids["ack"],
        },
        trigger_rule="none_failed",  # also after a dry run (the changing steps are skipped)
        retries=1,
        retry_delay=retry_delay,
        **common,
    )
    chain(plan, expand_tasks, *pre_barrier, barrier, stop, write, submit, ack, report)
    return plan, report


def expansion_task_group(
    *,
    job_name: str,
    topics: str | Sequence[str],
    application_args: Sequence[str],
    group_id: str = "samza_expand",
    factor: int | str = 2,
    targets: Mapping[str, int] | None = None,
    follow_live_counts: bool = False,
    run_mode: str = "continuous",
    kafka_conn_id: str = "kafka_default",
    spark_conn_id: str = "spark_default",
    application: str = DEFAULT_APPLICATION,
    drain_application_args: Sequence[str] | None = None,
    spark_conf: Mapping[str, Any] | None = None,
    spark_env_vars: Mapping[str, Any] | None = None,
    spark_submit_kwargs: Mapping[str, Any] | None = None,
    coordinator: str = "kafka",
    consumer_group: str | None = None,
    producer_refresh_grace_s: float | str = 300.0,
    barrier_timeout_s: float | str = 3600.0,
    stop_timeout_s: float = 600.0,
    ack_timeout_s: float = 1800.0,
    poll_interval_s: float = 10.0,
    dry_run: bool | str = False,
    check_partitioner: bool = True,
    write_job_model_operator: type[BaseOperator] = WriteJobModelOperator,
    retries: int = 2,
    retry_delay: timedelta = timedelta(seconds=30),
    log_dir: str | None = None,
) -> TaskGroup:
    """The expansion chain as a TaskGroup (task ids ``<group_id>.plan`` ...), for use inside a
    ``with DAG(...)`` block. Arguments as `build_expansion_dag` (without the DAG ones)."""
    with TaskGroup(group_id=group_id) as group:
        _add_chain(prefix=f"{group_id}.", **_chain_kwargs(locals()))
    return group


def build_expansion_dag(
    dag_id: str,
    *,
    job_name: str,
    topics: str | Sequence[str],
    application_args: Sequence[str],
    factor: int | str = 2,
    targets: Mapping[str, int] | None = None,
    follow_live_counts: bool = False,
    run_mode: str = "continuous",
    kafka_conn_id: str = "kafka_default",
    spark_conn_id: str = "spark_default",
    application: str = DEFAULT_APPLICATION,
    drain_application_args: Sequence[str] | None = None,
    spark_conf: Mapping[str, Any] | None = None,
    spark_env_vars: Mapping[str, Any] | None = None,
    spark_submit_kwargs: Mapping[str, Any] | None = None,
    coordinator: str = "kafka",
    consumer_group: str | None = None,
    producer_refresh_grace_s: float | str = 300.0,
    barrier_timeout_s: float | str = 3600.0,
    stop_timeout_s: float = 600.0,
    ack_timeout_s: float = 1800.0,
    poll_interval_s: float = 10.0,
    dry_run: bool | str = False,
    check_partitioner: bool = True,
    write_job_model_operator: type[BaseOperator] = WriteJobModelOperator,
    retries: int = 2,
    retry_delay: timedelta = timedelta(seconds=30),
    log_dir: str | None = None,
    schedule: Any = None,
    params: Mapping[str, Any] | None = None,
    start_date: datetime | None = None,
    tags: Sequence[str] = ("samza-expand",),
    description: str | None = None,
    doc_md: str | None = None,
    max_active_runs: int = 1,
) -> DAG:
    """A DAG expanding ``topics`` of the stateful job ``job_name`` (see the module docstring).

    * ``topics`` with ``factor`` (x2, x4 ...; may be a template) or ``targets`` ({topic: count});
      ``follow_live_counts``: grow the job model to the topics' live counts (the topic was grown
      outside Airflow, as in the event-driven DAG).
    * ``application``/``application_args``/``spark_conf``/``spark_env_vars``/
      ``spark_submit_kwargs``: the restarted job's ``SparkSubmitOperator`` arguments on
      ``spark_conn_id``; ``drain_application_args``: the available-now drain run (default the
      same args; the drain job reads the current job model).
    * ``producer_refresh_grace_s``: at least the producers' metadata refresh interval.
    * ``write_job_model_operator``: the operator writing vN+1 (default the SEP-5 FixedTasks
      writer; tests swap in a naive one to show what breaks).
    """
    dag = DAG(
        dag_id,
        schedule=schedule,
        start_date=start_date or datetime(2026, 1, 1),
        catchup=False,
        max_active_runs=max_active_runs,
        params=dict(params or {}),
        tags=list(tags),
        description=description or DEFAULT_DESCRIPTION,
        doc_md=doc_md,
        render_template_as_native_obj=False,
    )
    with dag:
        _add_chain(prefix="", **_chain_kwargs(locals()))
    return dag


_CHAIN_ARGS = (
    "job_name",
    "topics",
    "factor",
    "targets",
    "follow_live_counts",
    "run_mode",
    "kafka_conn_id",
    "spark_conn_id",
    "application",
    "application_args",
    "drain_application_args",
    "spark_conf",
    "spark_env_vars",
    "spark_submit_kwargs",
    "coordinator",
    "consumer_group",
    "producer_refresh_grace_s",
    "barrier_timeout_s",
    "stop_timeout_s",
    "ack_timeout_s",
    "poll_interval_s",
    "dry_run",
    "check_partitioner",
    "write_job_model_operator",
    "retries",
    "retry_delay",
    "log_dir",
)


def _chain_kwargs(scope: Mapping[str, Any]) -> dict[str, Any]:
    return {name: scope[name] for name in _CHAIN_ARGS}


__all__ = [
    "DEFAULT_APPLICATION",
    "build_expansion_dag",
    "expansion_task_group",
    "stream_job_args",
]
