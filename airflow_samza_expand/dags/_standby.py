"""The restart tasks of the expansion chain beside the spark-submit launch: the standby tasks
(`_protocol.restart.warm`): ``submit_standby`` (the warm restart's vN+1 standby, launched right
after the expansion, before the stop) and ``hot_standby`` (a second vN+1 processor kept for
failover, after the submit step); and the user's restart task (``RestartSettings.task``) with
the ``submit`` gate before it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator

from airflow_samza_expand.airflow._failure import on_step_failure
from airflow_samza_expand.airflow.operators._standby import LaunchStandbyOperator
from airflow_samza_expand.airflow.operators._submit import RestartGateOperator
from airflow_samza_expand.dags._settings import ExpansionSettings


def standby_tasks(
    s: ExpansionSettings,
    expand_tasks: Sequence[BaseOperator],
    stop: BaseOperator,
    submit: BaseOperator,
    report: BaseOperator,
    spark: Mapping[str, Any],
    owned: Mapping[str, Any],
    application_args: Sequence[str] | Any,
) -> list[BaseOperator]:
    """Add the standby tasks the settings ask for; return them.

    ``application_args``: a list, or (``jobs="all"``) the mapped group's argument as it is.
    """
    common = {
        "application_args": application_args,
        "log_dir": s.spark.log_dir,
        # the standby becomes the restarted job: the same order check as the submit step's
        "on_stale_placement": (s.barrier.on_stale_placement if s.takes_runtime_flags else None),
        "retries": s.retries,
        "retry_delay": s.retry_delay,
        **spark,
        **owned,
    }
    added: list[BaseOperator] = []
    if s.launches_standby:  # a strategy the plan may choose launches a standby early
        standby = LaunchStandbyOperator(task_id="submit_standby", step="standby", **common)
        for task in expand_tasks:
            task >> standby
        standby >> stop  # the standby exists before vN stops: vN hands the lease over to it
        added.append(standby)
    if s.restart.hot_standby:
        hot = LaunchStandbyOperator(
            task_id="hot_standby", step="hot_standby", processors=2, **common
        )
        submit >> hot >> report
        added.append(hot)
    return added


def user_restart_task(s: ExpansionSettings, plan: BaseOperator) -> BaseOperator | None:
    """The user's "start vN+1" task (``RestartSettings.task``), in this DAG; None without one."""
    given = s.restart.task
    if given is None:
        return None
    task = given if isinstance(given, BaseOperator) else given(s.job.name)
    if not isinstance(task, BaseOperator):
        raise TypeError(
            f"RestartSettings(task=...)({s.job.name!r}) returned {task!r} - return the "
            "operator that starts the job on its newest job model"
        )
    if not task.has_dag():
        task.dag = plan.dag  # an operator made outside the DAG joins it
    return task


def restart_gate(
    s: ExpansionSettings, restart_task: BaseOperator, owned: Mapping[str, Any]
) -> BaseOperator:
    """The submit step when the user supplies the restart task: it decides and records, and
    the user's task after it starts the job (skipped when the job takes vN+1 itself)."""
    return RestartGateOperator(
        task_id="submit",
        restart_task_id=restart_task.task_id,
        retries=s.retries,
        retry_delay=s.retry_delay,
        on_failure_callback=on_step_failure,
        **owned,
    )


__all__ = ["restart_gate", "standby_tasks", "user_restart_task"]
