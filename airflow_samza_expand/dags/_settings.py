"""`ExpansionSettings`: everything the expansion chain needs - the groups of `dags._groups`
(``job``, ``kafka``, ``spark``, ``barrier``, ``restart``, ``ownership``, ``growth``) and the
settings of the steps themselves - resolved once and shared by `build_expansion_dag` and
`expansion_task_group` (as astronomer-cosmos shares one converter between ``DbtDag`` and
``DbtTaskGroup``); docs/reference.md, "DAG factory settings", describes each field. Numbers
and booleans a user may set in a trigger form may be Jinja templates such as
``"{{ params.factor }}"``."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator

from airflow_samza_expand._protocol import restart
from airflow_samza_expand.airflow._compat import is_mapped_argument
from airflow_samza_expand.airflow._order import check_order_settings
from airflow_samza_expand.airflow.operators._write_model import WriteJobModelOperator
from airflow_samza_expand.core._modes import (
    OnStalePlacement,
    OtherJobs,
    Restart,
    RunMode,
    is_template,
)
from airflow_samza_expand.core.policy import GrowthPolicy
from airflow_samza_expand.dags._groups import (
    DEFAULT_APPLICATION,
    GROUPS,
    BarrierSettings,
    GrowthSettings,
    JobSettings,
    KafkaSettings,
    OwnershipSettings,
    RestartSettings,
    SparkSettings,
)
from airflow_samza_expand.dags._job_args import is_stream_job_args


@dataclass(frozen=True)
class ExpansionSettings:
    """The expansion of one stateful job, or of several reading the same topics
    (``JobSettings(jobs=...)``, each job's own fields in ``per_job``): the groups, and what
    every step shares (a dry run, the poll interval, the retries, the write step's operator)."""

    job: JobSettings = field(default_factory=JobSettings)
    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    spark: SparkSettings = field(default_factory=SparkSettings)
    barrier: BarrierSettings = field(default_factory=BarrierSettings)
    restart: RestartSettings = field(default_factory=RestartSettings)
    ownership: OwnershipSettings = field(default_factory=OwnershipSettings)
    growth: GrowthSettings = field(default_factory=GrowthSettings)
    dry_run: bool | str = False
    poll_interval_s: float = 10.0  # every wait of the chain
    retries: int = 2
    retry_delay: timedelta = field(default=timedelta(seconds=30))
    write_job_model_operator: type[BaseOperator] = WriteJobModelOperator

    @property
    def launch_application(self) -> Any:
        """What the DAG launches: its ``application``; else the shipped job when the
        ``application_args`` come from ``stream_job_args`` (a DAG built for it); else None."""
        if self.spark.application:
            return self.spark.application
        return DEFAULT_APPLICATION if is_stream_job_args(self.job.application_args) else None

    @property
    def owns_launch(self) -> bool:
        """The DAG may launch the job: it names an application (`launch_application`) or a
        restart task. Else it never launches anything (the plan waits for a job that is down)."""
        return self.restart.task is not None or self.launch_application is not None

    @property
    def takes_runtime_flags(self) -> bool:
        """The shipped job, or an application on ``spark.runtime`` (with ``jobs="all"``, an
        application resolved per job: the shipped job or none)."""
        app = self.launch_application
        return (
            app == DEFAULT_APPLICATION
            or is_mapped_argument(app)
            or self.spark.application_on_runtime
        )

    def __post_init__(self) -> None:
        for name, cls in GROUPS.items():
            if not isinstance(getattr(self, name), cls):
                raise TypeError(f"{name}={getattr(self, name)!r}: pass {name}={cls.__name__}(...)")
        self._parse_modes()  # each mode a member of its enum: a clear error at parse time
        job = self.job
        check_order_settings(self.barrier.on_stale_placement, self.barrier.stale_quiet_s)
        if isinstance(job.jobs, str) and job.jobs != "all":
            raise ValueError(
                f"jobs={job.jobs!r}: name the jobs to expand together, e.g. "
                "jobs=['orders-counter', 'orders-audit'], or jobs='all' (every managed job "
                "reading the topics, found when the run starts)"
            )
        if job.jobs is not None and not isinstance(job.jobs, str):
            if len(set(job.jobs)) != len(job.jobs) or not job.jobs:
                raise ValueError(f"jobs={list(job.jobs)!r}: name each job once")
        elif job.jobs is None and not job.name:
            raise ValueError(
                "the job has no name - name the stateful job: job=JobSettings(name=...) (or "
                "JobSettings(jobs=[...]))"
            )
        if not self.topic_list():
            raise ValueError(
                "topics is empty - name the input topic(s) to expand: job=JobSettings(topics=...)"
            )
        if isinstance(self.growth.policy, Mapping):  # InvalidPolicyError names the fix
            policy = GrowthPolicy.from_dict(self.growth.policy)
            object.__setattr__(self, "growth", dataclasses.replace(self.growth, policy=policy))
        self._check_restart_task()
        if self.restart.hot_standby and self.mode != RunMode.CONTINUOUS:
            raise ValueError(
                "hot_standby=True needs run_mode='continuous' (an available-now run ends: "
                "there is nothing to fail over from)"
            )
        self._check_launch()

    def _parse_modes(self) -> None:
        """The modes given as strings, as their enum members (a template is kept: Airflow
        renders it, the operator checks it); ValueError naming the bad value and the choices."""
        b, o = self.barrier, self.ownership
        parsed = {
            "job": {"run_mode": RunMode.parse(self.job.run_mode, "run_mode")},
            "restart": {"restart": Restart.parse(self.restart.restart, "restart")},
            "barrier": {"on_stale_placement": b.on_stale_placement if is_template(
                b.on_stale_placement) else OnStalePlacement.parse(
                b.on_stale_placement, "on_stale_placement")},
            "ownership": {"other_jobs": o.other_jobs if is_template(o.other_jobs)
                          else OtherJobs.parse(o.other_jobs, "other_jobs")},
        }  # fmt: skip
        for group, fields in parsed.items():
            replaced = dataclasses.replace(getattr(self, group), **fields)
            object.__setattr__(self, group, replaced)

    @classmethod
    def of(cls, settings: ExpansionSettings | None, fields: Mapping[str, Any]) -> ExpansionSettings:
        """`settings` (the ``fields`` given replace its own), or one built from ``fields``
        (TypeError names an unknown one). A group given as None: its defaults."""
        fields = {k: v for k, v in fields.items() if not (k in GROUPS and v is None)}
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(fields) - known)
        if unknown:
            homes = [
                f"{group}={c.__name__}({name}=...)"
                for name in unknown
                for group, c in GROUPS.items()
                if name in {f.name for f in dataclasses.fields(c)}
            ]
            where = f" - give {', '.join(homes)}" if homes else ""
            raise TypeError(
                f"unknown expansion setting(s) {unknown}{where}; the settings are: "
                f"{sorted(known)} (each group's fields in it, e.g. barrier=BarrierSettings(...))"
            )
        if settings is not None:
            return dataclasses.replace(settings, **fields)
        return cls(**fields)

    def for_job(self, name: str) -> ExpansionSettings:
        """The settings of job `name` of a multi-job run (its ``per_job`` fields applied)."""
        per_job = self.job.per_job
        own = per_job(name) if callable(per_job) else (per_job or {}).get(name)
        with_own = self.with_fields(own or {}, f"per_job[{name!r}]")
        if not with_own.job.application_args:
            raise ValueError(
                f"job {name!r} has no application_args - give them in per_job[{name!r}] "
                "({'job': {'application_args': [...]}})"
            )
        log_dir = os.path.join(self.spark.log_dir, name) if self.spark.log_dir else None
        return dataclasses.replace(
            with_own,
            job=dataclasses.replace(with_own.job, name=name, jobs=None, per_job=None),
            spark=dataclasses.replace(with_own.spark, log_dir=log_dir),
            ownership=dataclasses.replace(
                with_own.ownership,
                other_jobs=OtherJobs.INCLUDE,
                co_jobs=tuple(j for j in self.job.jobs or () if j != name),
            ),
        )

    def with_fields(self, own: Mapping[str, Any], where: str) -> ExpansionSettings:
        """These settings with group fields replaced: ``own`` is ``{group: {field: value}}``
        (TypeError naming an unknown group or field, in ``where``)."""
        replaced: dict[str, Any] = {}
        for group, values in own.items():
            cls = GROUPS.get(group)
            if cls is None or not isinstance(values, Mapping):
                raise TypeError(
                    f"{where}: {group!r} is not a settings group - give "
                    f"{{group: {{field: value}}}} with a group of {sorted(GROUPS)}"
                )
            names = {f.name for f in dataclasses.fields(cls)}
            unknown = sorted(set(values) - names)
            if unknown:
                raise TypeError(f"{where}: unknown setting(s) {unknown} of {cls.__name__}")
            replaced[group] = dataclasses.replace(getattr(self, group), **values)
        return dataclasses.replace(self, **replaced)

    @property
    def mode(self) -> RunMode:
        return RunMode.parse(self.job.run_mode, "run_mode")

    def _check_restart_task(self) -> None:
        task = self.restart.task
        if task is None:
            return
        if not (isinstance(task, BaseOperator) or callable(task)):
            raise ValueError(
                f"restart task={task!r}: give an operator that starts the job on "
                "its newest job model (e.g. a KubernetesPodOperator or a BashOperator calling "
                "your deploy script), or a callable job_name -> operator"
            )
        if isinstance(task, BaseOperator) and self.job.jobs is not None:
            raise ValueError(
                "restart task: with jobs=[...] give a callable job_name -> operator (one task "
                "per job), not one operator"
            )
        if self.mode != RunMode.CONTINUOUS:
            raise ValueError("a restart task needs run_mode='continuous'")
        asked = restart.STRATEGIES.get(self.restart.restart)
        if asked is not None and not asked.needs_task:
            raise ValueError(
                f"a restart task with restart={self.restart.restart!r}: the restart task "
                "replaces the spark-submit launch - use restart='auto' (in place or in-app "
                "when the job can, else your task)"
            )

    def _check_launch(self) -> None:
        """A DAG that owns no launch asks for nothing that launches (checked per job)."""
        if self.job.jobs is not None or self.owns_launch:
            return
        name = f"job {self.job.name!r}"
        fix = (
            "name how to launch it: SparkSettings(application=...) (or application_args "
            "from stream_job_args for the shipped job), or RestartSettings(task=...)"
        )
        if self.mode != RunMode.CONTINUOUS:
            raise ValueError(
                f"{name}: run_mode={self.job.run_mode!r} runs the job from the DAG (the drain "
                f"and the run on the new job model), but the DAG names no application - {fix}"
            )
        asked = restart.STRATEGIES.get(self.restart.restart)
        if asked is not None and not asked.launches_nothing:
            raise ValueError(
                f"{name}: restart={self.restart.restart!r} launches the job, but the DAG names "
                f"no application and no restart task - {fix}, or use restart='auto' (the job "
                "then switches in place or in-app, or the plan fails naming why)"
            )
        if self.restart.hot_standby:
            raise ValueError(f"{name}: hot_standby=True launches a processor - {fix}")

    @property
    def restart_requested(self) -> str | None:
        """The restart the plan step is asked to choose, or None: none is chosen (available-now
        runs, and ``cold``: the steps then stop and launch). With a restart task: its strategy
        (in place or in-app still first when the job can)."""
        if self.mode != RunMode.CONTINUOUS:
            return None
        if self.restart.task is not None:
            return next(m for m, s in restart.STRATEGIES.items() if s.needs_task)
        asked = restart.STRATEGIES.get(self.restart.restart)
        if asked is not None and asked.capability is None:
            return None  # cold: nothing to choose
        return self.restart.restart

    def may_choose(self) -> list[restart.RestartStrategy]:
        """The strategies the plan step may choose for these settings ([]: it chooses none)."""
        requested = self.restart_requested
        if requested is None:
            return []
        asked = restart.STRATEGIES.get(requested)
        if asked is None and not self.owns_launch:  # auto, launching nothing
            return [s for s in restart.STRATEGIES.values() if s.launches_nothing]
        if asked is None:  # auto
            return [s for s in restart.STRATEGIES.values() if not s.needs_task]
        if asked.needs_task:  # in place or in-app first when the job can
            return [s for s in restart.STRATEGIES.values() if s is asked or s.launches_nothing]
        return [asked]

    @property
    def launches_standby(self) -> bool:
        """The plan step chooses the restart (continuous mode; the steps follow the choice it
        records) and it may launch a standby early (the ``submit_standby`` task)."""
        return self.restart_requested is not None and any(
            s.launches_standby for s in self.may_choose()
        )

    def topic_list(self) -> list[str]:
        topics = self.job.topics
        return [topics] if isinstance(topics, str) else list(topics)


def with_trigger(args: Sequence[str], trigger: str) -> list[str]:
    """The job's command line ``args`` with its ``--trigger`` value replaced (or added)."""
    out = list(args)
    if "--trigger" in out:
        i = out.index("--trigger")
        out[i + 1 : i + 2] = [trigger]
    else:
        out += ["--trigger", trigger]
    return out


__all__ = ["DEFAULT_APPLICATION", "ExpansionSettings", "with_trigger"]
