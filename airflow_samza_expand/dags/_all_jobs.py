"""``jobs="all"``: expand every managed job reading the topics, found when the run starts.

The job list is not known when the DAG is parsed, so the per-job chain is one *mapped* task
group (Airflow dynamic task mapping): the ``jobs`` task (`DiscoverJobsOperator`) finds the
managed jobs whose latest job model reads a topic
(`_protocol.steps.plan.readers.find_readers`) and returns one row per job - its name, the run's
other jobs (``co_jobs``), and the fields that differ per job (``application``, ``application_args``,
``spark_conf``, ``log_dir``, from ``per_job`` applied at run time: a job whose arguments do not come
from ``stream_job_args``, in a DAG that names no application, is launched by nothing); the ``job``
group (plan ... report, the chain of `factory._add_chain`) is expanded over the rows, one instance
per job, with its own lease, record, coordinator store, group and Spark settings; its XCom pulls
name the instance's own map index. Then `AllJobsReportOperator` lists each job's outcome as
`JobsReportOperator` does for ``jobs=[...]``.

Why not task groups as for ``jobs=[...]``: a task group per job needs the names at parse
time. Why this is enough: every reader found is in the run, and each plan refuses a job that
appears between discovery and plan (``co_jobs``, ``other_jobs="include"``). The difference:
the instances are independent, so one job's plan is not waited for before another job's growth
(with ``jobs=[...]`` every plan comes first).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from airflow.sdk import BaseOperator, task_group
from airflow.sdk.exceptions import AirflowFailException

from airflow_samza_expand._protocol.steps.plan.readers import find_readers
from airflow_samza_expand.airflow._compat import is_mapped_argument
from airflow_samza_expand.airflow._shell import KafkaClients, protocol_outcomes
from airflow_samza_expand.airflow.operators._jobs_report import JobsReportOperator, job_outcome
from airflow_samza_expand.core._modes import RunMode
from airflow_samza_expand.dags._settings import ExpansionSettings, with_trigger

ALL_JOBS = "all"
PER_JOB_FIELDS = {"job": frozenset({"application_args"}), "spark": frozenset({"conf"})}


def is_mapped(value: Any) -> bool:
    """True for an argument of a mapped task group (resolved per instance at run time)."""
    return is_mapped_argument(value)


def job_rows(s: ExpansionSettings, jobs: list[str]) -> list[dict[str, Any]]:
    """One row per job (`ROW_FIELDS`); ValueError/TypeError name a job whose fields are bad."""
    every = dataclasses.replace(s, job=dataclasses.replace(s.job, jobs=jobs))
    per_job = s.job.per_job
    may_differ = sorted(f"{g}.{f}" for g, fields in PER_JOB_FIELDS.items() for f in fields)
    rows = []
    for name in jobs:
        own = per_job(name) if callable(per_job) else (per_job or {}).get(name)
        fixed = sorted(
            f"{group}.{f}"
            for group, values in (own or {}).items()
            for f in (values if isinstance(values, dict) else [values])
            if f not in PER_JOB_FIELDS.get(group, ())
        )
        if fixed:
            raise ValueError(
                f"per_job[{name!r}] sets {fixed}: with jobs='all' only "
                f"{may_differ} may differ per job - set the others for every job"
            )
        one = every.for_job(name)
        args = [str(a) for a in one.job.application_args]
        if one.mode == RunMode.AVAILABLE_NOW and one.takes_runtime_flags:
            args = with_trigger(args, "available-now")
        rows.append(
            {
                "job_name": name,
                # what this job's chain launches: the DAG's application, the shipped job for
                # stream_job_args, else None (that job's chain launches nothing)
                "application": one.launch_application,
                "application_args": args,
                "spark_conf": dict(one.spark.conf or {}),
                "co_jobs": list(one.ownership.co_jobs),
                "log_dir": one.spark.log_dir,
            }
        )
    return rows


class DiscoverJobsOperator(KafkaClients, BaseOperator):
    """The managed jobs reading the topics of ``settings``, as rows of the ``job`` group."""

    template_fields = ("coordinator",)
    ui_color = "#efe3ff"

    def __init__(self, *, settings: ExpansionSettings, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.settings = settings
        self.coordinator = settings.kafka.coordinator
        self.kafka_config_id = settings.kafka.kafka_config_id
        self.request_timeout_s = 30.0

    def execute(self, context: Any) -> list[dict[str, Any]]:
        topics = self.settings.topic_list()
        try:
            with protocol_outcomes():
                readers = find_readers(
                    self.admin,
                    topics,
                    coordinator=self.coordinator,
                    managed_jobs=self.settings.ownership.managed_jobs,
                )
        finally:
            self.close_clients()
        jobs = readers.jobs()
        if not jobs:
            raise AirflowFailException(
                f"jobs='all': no managed job reads {', '.join(topics)} (coordinator "
                f"{self.coordinator!r}) - write each job's job model first, or name the jobs "
                "with jobs=[...]"
            )
        try:
            rows = job_rows(self.settings, jobs)
        except (TypeError, ValueError) as exc:
            raise AirflowFailException(f"jobs='all': {exc}") from None
        self.log.info("jobs='all': %d managed job(s) read %s: %s",
                      len(jobs), ", ".join(topics), ", ".join(jobs))  # fmt: skip
        return rows


class AllJobsReportOperator(JobsReportOperator):
    """`JobsReportOperator` over the instances of the mapped ``job`` group."""

    def __init__(self, *, jobs_task_id: str, prefix: str, **kwargs: Any) -> None:
        super().__init__(groups={}, **kwargs)
        self.jobs_task_id = jobs_task_id
        self.prefix = prefix  # "<group>." of the mapped group

    def execute(self, context: Any) -> dict[str, Any]:
        ti = context["ti"]
        rows = ti.xcom_pull(task_ids=self.jobs_task_id) or []
        states = self._states(context)  # mapped instances: "<task id>_<map index>"
        if not rows:
            raise AirflowFailException(
                f"no jobs to report: task {self.jobs_task_id} found none "
                f"({states.get(self.jobs_task_id, 'no state')}) - see its log"
            )
        jobs: dict[str, Any] = {}
        for i, row in enumerate(rows):
            end = f"_{i}"
            own = {
                k[len(self.prefix) : -len(end)]: v
                for k, v in states.items()
                if k.startswith(self.prefix) and k.endswith(end)
            }
            report = ti.xcom_pull(task_ids=f"{self.prefix}report", map_indexes=i)
            jobs[row["job_name"]] = job_outcome(report, own)
        return self.conclude(ti, jobs)


def add_all_jobs(s: ExpansionSettings, prefix: str, add_chain: Any) -> None:
    """``jobs`` -> mapped ``job`` group (`add_chain` per job) -> ``report`` (module docstring)."""
    discover = DiscoverJobsOperator(task_id="jobs", settings=s)

    @task_group(group_id="job")
    def one_job(job_name, application, application_args, spark_conf, co_jobs, log_dir):  # noqa: ANN001
        own = s.with_fields(
            {
                "job": {
                    "jobs": None,
                    "per_job": None,
                    "name": job_name,
                    "application_args": application_args,
                },
                "spark": {
                    "application": s.spark.application or application,
                    "conf": spark_conf,
                    "log_dir": log_dir,
                },
                "ownership": {"other_jobs": "include", "co_jobs": co_jobs},
            },
            "jobs='all'",
        )
        add_chain(own, f"{prefix}job.")

    group = one_job.expand_kwargs(discover.output)
    group >> AllJobsReportOperator(task_id="report", jobs_task_id=f"{prefix}jobs",
                                   prefix=f"{prefix}job.")  # fmt: skip


__all__ = [
    "ALL_JOBS",
    "AllJobsReportOperator",
    "DiscoverJobsOperator",
    "add_all_jobs",
    "is_mapped",
    "job_rows",
]
