"""The plan step's wait for a job that is down, when the DAG owns no launch: a DAG that names no
application and no restart task never launches the job, so a plan that finds no live processor
of the newest job model raises `JobDownError` (before anything changes), the plan task waits for
the job to come back (`job_back_poll`, one look; the Airflow trigger loops over it) and, past its
time, fails with `job_down_refusal`: the job, its last heartbeat and what to do."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_samza_expand._protocol.poll import Poll
from airflow_samza_expand._protocol.restart import live_processors
from airflow_samza_expand.core._liveness import statuses
from airflow_samza_expand.core.errors import ExpansionError
from airflow_samza_expand.store import CoordinatorStore

DEFAULT_JOB_DOWN_TIMEOUT_S = 600.0  # a DAG owning no launch: for a job that is down

WHAT_TO_DO = (
    "this DAG names no application and no restart task, so it never launches the job - start "
    "the job (it picks its newest job model up), then trigger the DAG again; or name how the "
    "DAG may launch it: SparkSettings(application=...) or RestartSettings(task=...)"
)


class JobDownError(ExpansionError):
    """No live processor of the job's newest job model, and the DAG owns no launch: the plan
    changed nothing; wait for the job to come back (`job_back_poll`) or refuse."""

    def __init__(self, job_name: str, detail: Mapping[str, Any]) -> None:
        self.job_name = job_name
        self.detail = dict(detail)
        super().__init__(f"job {job_name!r} is down: {describe_down(self.detail)}; {WHAT_TO_DO}")


def last_heartbeat(processors: Mapping[str, Mapping[str, Any]]) -> str:
    """The newest heartbeat of the job's processor records, in words (who, when, in what state,
    on which job model, what it advertised), or that there is none on record."""
    beats = [s for s in statuses(processors).values() if s.heartbeat_at]
    if not beats:
        return "no heartbeat on record (the job never started, or its records were removed)"
    newest = max(beats, key=lambda s: str(s.heartbeat_at))
    age = newest.age_s()
    ago = f", {age:.0f} s ago" if age is not None else ""
    said = ", ".join(newest.capabilities) or "nothing"
    return (
        f"last heartbeat at {newest.heartbeat_at}{ago} from processor {newest.processor_id} "
        f"({newest.state} on job model v{newest.job_model_version}, advertising {said})"
    )


def job_back_poll(store: CoordinatorStore) -> Poll:
    """Done once a live processor of the newest job model heartbeats past ``starting``: a driver
    starting its query does not yet know what it can do (in-app needs its first read with
    Spark's own source), so a plan deciding then could refuse a restart the job can do. The
    detail names the version and the last heartbeat either way."""
    model = store.latest_job_model()
    version = model.version if model is not None else 0
    processors = store.processors()
    working = live_processors(processors, version)
    live = sorted(s.processor_id for s in working if s.state != "starting")
    starting = sorted(s.processor_id for s in working if s.state == "starting")
    detail = {"version": version, "last_heartbeat": last_heartbeat(processors), "live": live}
    if live:
        message = f"job {store.job_name} is back: {', '.join(live)} on job model v{version}"
        return Poll(True, message, {"status": "running", **detail}, detail=detail)
    if starting:
        return Poll(
            False,
            f"job {store.job_name} is starting ({', '.join(starting)} on job model v{version}): "
            "waiting for its first running heartbeat, which says what it can do",
            detail=detail,
            waiting_for=f"job {store.job_name} starting on v{version}",
        )
    return Poll(
        False,
        f"job {store.job_name} is down ({describe_down(detail)}): waiting for it to come back "
        "- this DAG launches nothing",
        detail=detail,
        waiting_for=f"job {store.job_name} down on v{version}",
    )


def describe_down(detail: Mapping[str, Any]) -> str:
    return (
        f"no live processor of job model v{detail.get('version')} "
        f"({detail.get('last_heartbeat') or 'no heartbeat on record'})"
    )


def job_down_refusal(job_name: str, detail: Mapping[str, Any], waited_s: float) -> str:
    """The plan's failure once the job stayed down for ``waited_s``: nothing was changed."""
    return (
        f"job {job_name!r} stayed down for {waited_s:.0f} s: {describe_down(detail)}. Nothing "
        f"was changed (no topic grown, no expansion recorded); {WHAT_TO_DO}"
    )


def require_live(store: CoordinatorStore, job_name: str) -> None:
    """JobDownError unless a live processor of the newest job model heartbeats."""
    progress = job_back_poll(store)
    if not progress.done:
        raise JobDownError(job_name, progress.detail)


__all__ = [
    "JobDownError",
    "job_back_poll",
    "job_down_refusal",
    "last_heartbeat",
    "require_live",
]
