"""The task instances of the DAG run behind an expansion, read from Airflow's metadata database
(the api-server the plugin runs in has it): each task's state, start, end and Airflow's own
duration, and the task's page in Airflow's UI (its log). An expansion owned by a DAG run has
``owner`` ``airflow:<dag_id>/<run_id>`` (`_protocol.ownership.airflow_holder`)."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any
from urllib.parse import quote

from airflow_samza_expand._protocol.steps import STEPS
from airflow_samza_expand.airflow._ui.records import Expansion, TaskRun

log = logging.getLogger(__name__)
OWNER_PREFIX = "airflow:"


def dag_run_of(owner: str | None) -> tuple[str, str] | None:
    """(dag_id, run_id) of an ``airflow:<dag_id>/<run_id>`` owner, else None."""
    if not owner or not owner.startswith(OWNER_PREFIX) or "/" not in owner:
        return None
    dag_id, run_id = owner[len(OWNER_PREFIX) :].split("/", 1)
    return (dag_id, run_id) if dag_id and run_id else None


def log_path(dag_id: str, run_id: str, task_id: str) -> str:
    """The task instance's page in Airflow's UI (its log), below Airflow's root path."""
    parts = (quote(x, safe="") for x in (dag_id, run_id, task_id))
    return "/dags/{}/runs/{}/tasks/{}".format(*parts)


def _iso(value: Any) -> str | None:
    return None if value is None else value.isoformat()


def task_runs(dag_id: str, run_id: str) -> tuple[TaskRun, ...]:
    """Every task instance of the DAG run, in start order (not started: last, in the chain's
    order)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.scalars(
            select(TaskInstance).where(TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id)
        ).all()
        runs = [
            TaskRun(
                task_id=ti.task_id,
                state=None if ti.state is None else str(ti.state),
                started_at=_iso(ti.start_date),
                ended_at=_iso(ti.end_date),
                duration_s=None if ti.duration is None else round(float(ti.duration), 1),
                try_number=ti.try_number,
                log_path=log_path(dag_id, run_id, ti.task_id),
            )
            for ti in rows
        ]
    chain: dict[str, int] = {}
    for i, step in enumerate(STEPS):
        chain.setdefault(step.task_id, i)
    return tuple(
        sorted(runs, key=lambda r: (r.started_at or "~", chain.get(r.task_id, 99), r.task_id))
    )


def with_tasks(expansion: Expansion) -> Expansion:
    """`expansion` with its DAG run's task instances (unchanged when no DAG run owns it or
    Airflow's database cannot be read here: the page then shows the record's step times)."""
    run = dag_run_of(expansion.owner)
    if run is None:
        return expansion
    try:
        tasks = task_runs(*run)
    except Exception as exc:  # no metadata database here: the record's own times show
        log.debug("task instances of %s not read: %s", run, exc)
        return expansion
    return dataclasses.replace(expansion, tasks=tasks) if tasks else expansion


__all__ = ["dag_run_of", "log_path", "task_runs", "with_tasks"]
