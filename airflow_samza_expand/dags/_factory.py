"""The expansion DAG factory.

``build_expansion_dag(...)`` returns a DAG, ``expansion_task_group(...)`` the same chain as a
TaskGroup for a DAG of your own::

    plan -> expand -> ordering barrier -> stop job -> write job model vN+1
         -> submit restarted job (SparkSubmitOperator) -> wait for acknowledgement -> report

Restart (``RestartSettings.restart``): ``"auto"`` (default, continuous mode) is
``"in-place"`` when the running processors advertise the ``in-place`` capability (the running
job switches at a batch boundary; the barrier holds at its snapshot and stop, standby and
submit do nothing), else ``"in-app"`` when they advertise ``in-app`` (a job on the runtime
that hands ``job.run`` the function starting its query restarts that query on vN+1 inside the
same application once the barrier passed; nothing is stopped or launched), else
``"warm"`` when they advertise ``standby`` (the plan step decides and records it), else
``"cold"``. ``RestartSettings(task=...)`` (an operator, or job name -> operator) replaces the
spark-submit launch for a job that can only be restarted: after the stop and the write, the
``submit`` step decides and the user's task starts vN+1 (both skipped, saying why, when the
job takes vN+1 itself). ``"warm"`` also launches the vN+1 processor as a
standby right after the expansion (``submit_standby``, in parallel with the barrier's producer
grace); vN releases the job's active lease after its last committed batch, the standby takes
it once vN+1 is written, and ``submit`` launches nothing. ``"cold"``: stop, then start.
``RestartSettings(hot_standby=True)`` keeps a second vN+1 processor waiting.

A DAG launches the job only when it says how: ``SparkSettings(application=...)``, a restart
task, or ``application_args`` from ``stream_job_args`` (the shipped job). One that says none
never launches anything: ``auto`` then takes only in place or in-app, and a plan that finds no
live processor waits (deferred; in the worker with ``default_args={"deferrable": False}``) up
to ``RestartSettings.job_down_timeout_s`` for the job to come back, then fails changing nothing.

Run modes of the stateful job (``JobSettings.run_mode``):

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
timeout, dry run) may be a Jinja template such as ``"{{ params.factor }}"``. The arguments are
`ExpansionSettings`' fields: the groups (`dags._groups`: ``job=JobSettings(...)``, ``kafka=``,
``spark=``, ``barrier=``, ``restart=``, ``ownership=``, ``growth=``) and the steps' own
(``dry_run``, ``retries``, ...); an `ExpansionSettings` may also be passed whole.

Ownership: the plan step takes the job's expansion lease for the DAG run; a second run (of
this DAG or another) waits deferred and, once the expansion it joined has completed, ends with
its steps skipped (never failed). A dry run writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from airflow.sdk import DAG, BaseOperator, TaskGroup, chain

from airflow_samza_expand.airflow._failure import on_step_failure
from airflow_samza_expand.airflow.operators import (
    ExpandPartitionsOperator,
    PlanExpansionOperator,
    StopStatefulJobOperator,
)
from airflow_samza_expand.airflow.operators._jobs_report import JobsReportOperator
from airflow_samza_expand.airflow.operators._report import ExpansionReportOperator
from airflow_samza_expand.airflow.operators._submit import SubmitStreamJobOperator
from airflow_samza_expand.airflow.sensors import JobModelAckSensor, OrderingBarrierSensor
from airflow_samza_expand.core._modes import RunMode
from airflow_samza_expand.dags._all_jobs import ALL_JOBS, add_all_jobs, is_mapped
from airflow_samza_expand.dags._form import trigger_form
from airflow_samza_expand.dags._groups import (
    BarrierSettings,
    GrowthSettings,
    JobSettings,
    KafkaSettings,
    OwnershipSettings,
    RestartSettings,
    SparkSettings,
)
from airflow_samza_expand.dags._job_args import stream_job_args, stream_job_args_from_env
from airflow_samza_expand.dags._settings import DEFAULT_APPLICATION, ExpansionSettings, with_trigger
from airflow_samza_expand.dags._standby import restart_gate, standby_tasks, user_restart_task

DEFAULT_DESCRIPTION = (
    "Expand the Kafka input topics of a live stateful job (SEP-5 mapping + ordering barrier)"
)
STEP_TASK_IDS = ("plan", "expand", "barrier", "stop_job", "write_job_model", "submit", "ack")


def _is_template(value: Any) -> bool:
    return isinstance(value, str) and "{{" in value


def _pull(task_id: str, path: str, mapped: bool = False) -> str:
    index = ", map_indexes=ti.map_index" if mapped else ""  # one job of a mapped group (jobs="all")
    return "{{ ti.xcom_pull(task_ids='" + task_id + "'" + index + ")" + path + " }}"


def _add_chain(
    s: ExpansionSettings, prefix: str
) -> tuple[BaseOperator, list[BaseOperator], BaseOperator]:
    """The chain's tasks (ids as created; a TaskGroup adds ``prefix`` itself, XComs name it)."""
    mode, growth = s.mode, s.growth
    mapped = is_mapped(s.job.name)  # jobs="all": fields resolved per job at run time
    application_args = s.job.application_args if mapped else list(s.job.application_args)
    drain_args = s.job.drain_application_args
    if mode == RunMode.AVAILABLE_NOW and s.takes_runtime_flags and not mapped:
        application_args = with_trigger(application_args, "available-now")
        if drain_args is not None:
            drain_args = with_trigger(drain_args, "available-now")
    ids = {step: f"{prefix}{step}" for step in (*STEP_TASK_IDS, "barrier_snapshot", "report")}
    expansion_id = _pull(ids["plan"], "['expansion_id']", mapped)
    common = {"coordinator": s.kafka.coordinator, "kafka_config_id": s.kafka.kafka_config_id}
    # a step failed for good: its log says where the expansion stands and what to do
    retrying = {
        "retries": s.retries,
        "retry_delay": s.retry_delay,
        "on_failure_callback": on_step_failure,
    }
    owned = {"job_name": s.job.name, "expansion_id": expansion_id, **common}
    spark = {
        "conn_id": s.spark.conn_id,
        # none: the DAG never launches the job (the plan chooses no launching restart)
        "application": s.launch_application or "",
        "conf": s.spark.conf if mapped else dict(s.spark.conf or {}),
        "env_vars": dict(s.spark.env_vars or {}),
        "name": f"samza-expand-{s.job.name}"
        if not (_is_template(s.job.name) or mapped)
        else "samza-expand-job",
        **dict(s.spark.submit_kwargs or {}),
    }
    topics = s.topic_list()
    plan = PlanExpansionOperator(
        task_id="plan",
        job_name=s.job.name,
        **({"targets": dict(growth.targets)} if growth.targets else {"topics": s.job.topics}),
        factor=growth.factor,
        follow_live_counts=growth.follow_live_counts,
        check_partitioner=s.kafka.check_partitioner,
        consumer_group=s.job.consumer_group,
        dry_run=s.dry_run,
        policy=growth.policy,
        max_partitions=growth.max_partitions,
        other_jobs=s.ownership.other_jobs,
        co_jobs=s.ownership.co_jobs,
        managed_jobs=s.ownership.managed_jobs,
        lease_ttl_s=s.ownership.lease_ttl_s,
        poll_interval_s=s.poll_interval_s,
        # the plan chooses the restart from the running processors' capabilities
        restart=s.restart_requested,
        # a DAG that names no application and no restart task never launches the job
        owns_launch=s.launch_application
        if is_mapped(s.launch_application) and s.restart.task is None
        else s.owns_launch,
        job_down_timeout_s=s.restart.job_down_timeout_s,
        **common,
        **retrying,
    )
    expand_tasks: list[BaseOperator] = []
    for topic in topics:
        if growth.targets and topic in growth.targets:
            size: dict[str, Any] = {"target_partitions": growth.targets[topic]}
        elif not _is_template(topic):
            size = {
                "target_partitions": _pull(
                    ids["plan"], f"['plan']['counts_after']['{topic}']", mapped
                )
            }
        else:
            size = {"factor": growth.factor}
        expand_tasks.append(
            ExpandPartitionsOperator(
                task_id="expand" if len(topics) == 1 else f"expand_{topic}",
                topic=topic,
                dry_run=s.dry_run,
                skip_on_dry_run=True,
                **size,
                **owned,
                **retrying,
            )
        )
    barrier_kwargs = {
        "consumer_group": s.job.consumer_group,
        "producer_refresh_grace_s": s.barrier.producer_refresh_grace_s,
        "barrier_timeout_s": s.barrier.barrier_timeout_s,
        "poke_interval": s.poll_interval_s,
        "stale_quiet_s": s.barrier.stale_quiet_s,
        **owned,
    }
    pre_barrier: list[BaseOperator] = []
    if mode == RunMode.AVAILABLE_NOW:
        snapshot = OrderingBarrierSensor(
            task_id="barrier_snapshot",
            snapshot_only=True,
            mode="reschedule",
            **barrier_kwargs,
            **retrying,
        )
        drain = SubmitStreamJobOperator(
            task_id="drain",
            run_mode=RunMode.AVAILABLE_NOW,
            application_args=(drain_args or application_args)
            if mapped
            else list(drain_args or application_args),
            **spark,
            **retrying,
        )
        pre_barrier = [snapshot, drain]
    barrier = OrderingBarrierSensor(
        task_id="barrier", deferrable=mode == RunMode.CONTINUOUS, **barrier_kwargs, **retrying
    )
    stop = StopStatefulJobOperator(
        task_id="stop_job",
        reason="partition expansion " + expansion_id,
        # a warm restart: vN's stopped heartbeat is the standby's cue, so look often
        poll_interval_s=min(s.poll_interval_s, 0.5 if s.launches_standby else 5.0),
        stop_timeout_s=s.restart.stop_timeout_s,
        standby_warm_timeout_s=s.restart.standby_warm_timeout_s if s.launches_standby else None,
        **owned,
        **retrying,
    )
    write = s.write_job_model_operator(task_id="write_job_model", **owned, **retrying)
    restart_task = user_restart_task(s, plan)
    submit: BaseOperator = SubmitStreamJobOperator(
        task_id="submit",
        run_mode=mode,
        application_args=application_args,
        log_dir=s.spark.log_dir,
        # the order check: a job on the runtime checks what it reads beyond the barrier (another job
        # gets the flags in its application_args if it supports them)
        on_stale_placement=s.barrier.on_stale_placement if s.takes_runtime_flags else None,
        # a retry (on any worker) launches again only once the record's launch is gone
        retries=s.retries,
        retry_delay=s.retry_delay,
        on_failure_callback=on_step_failure,
        **spark,
        **owned,
    ) if restart_task is None else restart_gate(s, restart_task, owned)  # fmt: skip
    ack = JobModelAckSensor(
        task_id="ack",
        version=_pull(ids["write_job_model"], "['version']", mapped),
        accept_stopped=mode == RunMode.AVAILABLE_NOW,
        deferrable=True,  # not [operators]' default
        poke_interval=min(s.poll_interval_s, 5.0),
        timeout=s.restart.ack_timeout_s,
        # the user's restart task is skipped when the job takes vN+1 itself (in place, in-app)
        **({"trigger_rule": "none_failed"} if restart_task is not None else {}),
        **owned,
        **retrying,
    )
    report = ExpansionReportOperator(
        task_id="report",
        job_name=s.job.name,
        expansion_id="{{ (ti.xcom_pull(task_ids='"
        + ids["plan"]
        + ("', map_indexes=ti.map_index" if mapped else "'")
        + ") or {}).get('expansion_id') }}",
        **common,
        run_mode=mode,
        on_stale_placement=s.barrier.on_stale_placement,
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
        retry_delay=s.retry_delay,
    )
    restart = [restart_task] if restart_task is not None else []
    chain(plan, expand_tasks, *pre_barrier, barrier, stop, write, submit, *restart, ack, report)
    standby_tasks(s, expand_tasks, stop, submit, report, spark, owned, application_args)
    return plan, expand_tasks, report


def _add_jobs(s: ExpansionSettings, prefix: str) -> None:
    """One chain, or (``jobs``) one task group per job: its own plan (lease, record), expand,
    barrier, stop, write, submit, ack and report, in parallel with the others. Every job is
    planned before any topic grows (each plan also feeds the others' expand steps: a refusal
    grows nothing); the first expand step grows the topic, the others find it grown. Then
    `JobsReportOperator` ("report") shows each job's outcome."""
    if s.job.jobs == ALL_JOBS:
        add_all_jobs(s, prefix, _add_chain)
        return
    if not s.job.jobs:
        _add_chain(s, prefix)
        return
    plans: list[BaseOperator] = []
    expands: list[BaseOperator] = []
    reports: list[BaseOperator] = []
    groups: dict[str, str] = {}
    for name in s.job.jobs:
        group_id = name.replace(".", "_")
        with TaskGroup(group_id=group_id):
            plan, expand_tasks, report = _add_chain(s.for_job(name), f"{prefix}{group_id}.")
        plans.append(plan)
        expands += expand_tasks
        reports.append(report)
        groups[name] = f"{prefix}{group_id}."
    for plan in plans:
        plan >> expands
    reports >> JobsReportOperator(task_id="report", groups=groups)


def expansion_task_group(
    settings: ExpansionSettings | None = None, *, group_id: str = "samza_expand", **fields: Any
) -> TaskGroup:
    """The expansion chain as a TaskGroup (task ids ``<group_id>.plan`` ...), for use inside a
    ``with DAG(...)`` block. The settings as `build_expansion_dag` takes them."""
    resolved = ExpansionSettings.of(settings, fields)
    with TaskGroup(group_id=group_id) as group:
        _add_jobs(resolved, f"{group_id}.")
    return group


def build_expansion_dag(
    dag_id: str,
    settings: ExpansionSettings | None = None,
    *,
    schedule: Any = None,
    params: Mapping[str, Any] | None = None,
    start_date: datetime | None = None,
    tags: Sequence[str] = ("samza-expand",),
    description: str | None = None,
    doc_md: str | None = None,
    max_active_runs: int = 1,
    default_args: Mapping[str, Any] | None = None,
    **fields: Any,
) -> DAG:
    """A DAG expanding the topics of a stateful job (see the module docstring). ``fields``
    are `ExpansionSettings`' own: the groups ``job=JobSettings(...)``, ``kafka``, ``spark``,
    ``barrier``, ``restart``, ``ownership``, ``growth`` and ``dry_run``, ``poll_interval_s``,
    ``retries``, ``retry_delay``, ``write_job_model_operator`` (over ``settings`` when both
    are given); ``schedule`` ... ``default_args`` are the DAG's own
    (``default_args={"deferrable": False}`` reaches the plan and stop steps, which the factory
    leaves to Airflow's defaults: ``[operators] default_deferrable`` unless given).
    """
    resolved = ExpansionSettings.of(settings, fields)
    resolved, form = trigger_form(resolved, params)
    dag = DAG(
        dag_id,
        schedule=schedule,
        start_date=start_date or datetime(2026, 1, 1),
        catchup=False,
        max_active_runs=max_active_runs,
        params=form,  # the default trigger form unless `params` is given (dags/_form.py)
        tags=list(tags),
        description=description or DEFAULT_DESCRIPTION,
        doc_md=doc_md,
        render_template_as_native_obj=False,
        default_args=dict(default_args or {}),
    )
    with dag:
        _add_jobs(resolved, "")
    return dag


__all__ = [
    "DEFAULT_APPLICATION",
    "BarrierSettings",
    "ExpansionSettings",
    "GrowthSettings",
    "JobSettings",
    "KafkaSettings",
    "OwnershipSettings",
    "RestartSettings",
    "SparkSettings",
    "build_expansion_dag",
    "expansion_task_group",
    "stream_job_args",
    "stream_job_args_from_env",
]
