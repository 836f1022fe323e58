"""Plain helpers of the UI tests (a module of its own: `conftest` names clash across test
directories when pytest imports several)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from airflow_samza_expand._testing.launch import free_port  # noqa: F401 - below the ephemeral range


def http(method: str, url: str, *, token: str | None = None, body: dict | None = None):
    """(status, body text) of one request; HTTP errors are returned, not raised."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def planned_record(model, grown: dict[str, int], owner: str = "airflow:dag/run-1"):
    """A typed expansion record of `model`'s job growing its streams to `grown`: planned, its
    plan step done (for stores written by hand, without the DAG)."""
    from airflow_samza_expand.core._clock import now_iso
    from airflow_samza_expand.core._plan import plan_expansion
    from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus

    stamp = now_iso()
    before = {s: model.partition_counts()[s] for s in grown}
    name = ".".join(f"{s}.{before[s]}-{n}" for s, n in sorted(grown.items()))
    return ExpansionRecord(
        expansion_id=f"{model.job_name}~{name}",
        job_name=model.job_name,
        base_version=model.version,
        target_version=model.version + 1,
        plan=plan_expansion(model, before, grown).to_dict(),
        status=ExpansionStatus.PLANNED,
        owner=owner,
        created_at=stamp,
        updated_at=stamp,
    ).with_step("plan", started_at=stamp, ended_at=stamp)


def task_durations(dag_id: str, run_id: str) -> dict[str, float]:
    """Airflow's duration of each task instance of a DAG run (its metadata database)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.scalars(
            select(TaskInstance).where(TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id)
        ).all()
        return {ti.task_id: float(ti.duration) for ti in rows if ti.duration is not None}
