"""The standby tasks of the expansion chain (`protocol.restart.warm`): ``submit_standby`` (the
handover's vN+1 standby, launched right after the expansion, before the stop) and
``hot_standby`` (a second vN+1 processor kept for failover, after the submit step)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator

from airflow_samza_expand.airflow.operators.standby import LaunchStandbyOperator
from airflow_samza_expand.dags.settings import ExpansionSettings


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
        "log_dir": s.log_dir,
        # the standby becomes the restarted job: the same order check as the submit step's
        "on_stale_placement": (s.on_stale_placement if s.takes_runtime_flags else None),
        "retries": s.retries,
        "retry_delay": s.retry_delay,
        **spark,
        **owned,
    }
    added: list[BaseOperator] = []
    if s.warm_handover:  # a strategy the plan may choose launches a standby early
        standby = LaunchStandbyOperator(task_id="submit_standby", step="standby", **common)
        for task in expand_tasks:
            task >> standby
        standby >> stop  # the standby exists before vN stops: vN hands the lease over to it
        added.append(standby)
    if s.hot_standby:
        hot = LaunchStandbyOperator(
            task_id="hot_standby", step="hot_standby", processors=2, **common
        )
        submit >> hot >> report
        added.append(hot)
    return added


__all__ = ["standby_tasks"]
