"""`ExpansionSettings`: everything the expansion chain needs, resolved once and shared by
`build_expansion_dag` and `expansion_task_group` (as astronomer-cosmos shares one converter
between ``DbtDag`` and ``DbtTaskGroup``). The factories take the fields in groups
(`dags._groups`: ``job=JobSettings(...)``, ``barrier=BarrierSettings(...)``, ...) and resolve
them into this flat record, which the rest of the factory reads; docs/reference.md, "DAG
factory settings", names each field's group. Numbers and booleans a user may set in a trigger
form may be Jinja templates such as ``"{{ params.factor }}"``."""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator

from airflow_samza_expand._protocol import restart
from airflow_samza_expand._protocol.ownership import DEFAULT_LEASE_TTL_S
from airflow_samza_expand.airflow._compat import is_mapped_argument
from airflow_samza_expand.airflow._order import check_order_settings
from airflow_samza_expand.airflow.operators._submit import normalise_run_mode
from airflow_samza_expand.airflow.operators._write_model import WriteJobModelOperator
from airflow_samza_expand.core._plan import DEFAULT_MAX_PARTITIONS
from airflow_samza_expand.core.policy import GrowthPolicy
from airflow_samza_expand.dags._groups import DEFAULT_APPLICATION
from airflow_samza_expand.dags._job_args import is_stream_job_args


@dataclass(frozen=True)
class ExpansionSettings:
    """The expansion of one stateful job, or of several reading the same topics (``jobs``,
    with each job's own fields in ``per_job``); docs/reference.md describes each field."""

    job_name: str = ""
    topics: str | Sequence[str] = ()
    application_args: Sequence[str] = ()
    factor: int | str = 2
    targets: Mapping[str, int] | None = None
    follow_live_counts: bool = False
    run_mode: str = "continuous"
    kafka_config_id: str = "kafka_default"  # the Kafka connection, as the operators name it
    spark_conn_id: str = "spark_default"
    # what the DAG launches: None - the shipped job when application_args come from
    # stream_job_args, else nothing (`launch_application`)
    application: str | None = None
    # the application is built on airflow_samza_expand.spark.runtime (like the shipped job): it
    # takes the runtime's flags (--trigger available-now, the rule-1.5 order check)
    application_on_runtime: bool = False
    drain_application_args: Sequence[str] | None = None
    spark_conf: Mapping[str, Any] | None = None
    spark_env_vars: Mapping[str, Any] | None = None
    spark_submit_kwargs: Mapping[str, Any] | None = None
    coordinator: str = "kafka"
    consumer_group: str | None = None
    producer_refresh_grace_s: float | str = 300.0
    barrier_timeout_s: float | str = 3600.0
    stop_timeout_s: float = 600.0
    # warm handover: the stop step first waits this long for the vN+1 standby to be warm
    standby_warm_timeout_s: float = 600.0
    ack_timeout_s: float = 1800.0
    poll_interval_s: float = 10.0
    dry_run: bool | str = False
    check_partitioner: bool = True
    max_partitions: int | str = DEFAULT_MAX_PARTITIONS
    policy: GrowthPolicy | Mapping[str, Any] | None = None
    lease_ttl_s: float = DEFAULT_LEASE_TTL_S
    # restart of a continuous job (protocol.restart, rule 1.8): "auto" (the first strategy the
    # running job can do: in-place, in-app, the restart task below when given, warm, cold) or
    # one of them by name
    handover: str = restart.AUTO
    # a job that can only be restarted is started on vN+1 by this task instead of spark-submit:
    # a BaseOperator, or a callable (job name) -> BaseOperator (one per job with `jobs`)
    restart_task: Any = None
    hot_standby: bool = False  # keep a second processor of vN+1 waiting for the lease (failover)
    # a DAG that owns no launch: the plan waits this long for a job that is down to come back
    job_down_timeout_s: float = 600.0
    other_jobs: str = "refuse"  # other managed jobs reading the topics: include/refuse/ignore
    managed_jobs: Sequence[str] | None = None  # the jobs to check (default: discovered)
    # expand these jobs in one run: one task group each; "all": every managed job reading the
    # topics, found at run time (one mapped task group instance each)
    jobs: Sequence[str] | str | None = None
    # each job's own fields (application_args, spark_conf, consumer_group, ...): a mapping
    # {job: {field: value}} or a function job -> {field: value}
    per_job: Mapping[str, Mapping[str, Any]] | Callable[[str], Mapping[str, Any]] | None = None
    co_jobs: Sequence[str] = ()  # set by `for_job`: the other jobs the same run expands
    write_job_model_operator: type[BaseOperator] = WriteJobModelOperator
    retries: int = 2
    retry_delay: timedelta = field(default=timedelta(seconds=30))
    log_dir: str | None = None
    # rule 1.5: "warn" counts and reports stale placements after the snapshot, "fail" also
    # fails the report step and stops the job; stale_quiet_s None: the barrier's default
    on_stale_placement: str = "warn"
    stale_quiet_s: float | str | None = None
    kafka_conn_id: str | None = None  # deprecated spelling of kafka_config_id (taken, warned)

    @property
    def launch_application(self) -> Any:
        """What the DAG launches: its ``application``; else the shipped job when the
        ``application_args`` come from ``stream_job_args`` (a DAG built for it); else None."""
        if self.application:
            return self.application
        return DEFAULT_APPLICATION if is_stream_job_args(self.application_args) else None

    @property
    def owns_launch(self) -> bool:
        """The DAG may launch the job: it names an application (`launch_application`) or a
        restart task. Else it never launches anything (the plan waits for a job that is down)."""
        return self.restart_task is not None or self.launch_application is not None

    @property
    def takes_runtime_flags(self) -> bool:
        """The shipped job, or an application on ``spark.runtime`` (with ``jobs="all"``, an
        application resolved per job: the shipped job or none)."""
        app = self.launch_application
        return app == DEFAULT_APPLICATION or is_mapped_argument(app) or self.application_on_runtime

    def __post_init__(self) -> None:
        if self.kafka_conn_id is not None:
            warnings.warn(
                "kafka_conn_id is deprecated - pass kafka_config_id (the operators' name)",
                DeprecationWarning,
                stacklevel=4,
            )
            object.__setattr__(self, "kafka_config_id", self.kafka_conn_id)
            object.__setattr__(self, "kafka_conn_id", None)
        normalise_run_mode(self.run_mode)  # a clear error at parse time
        check_order_settings(self.on_stale_placement, self.stale_quiet_s)
        if isinstance(self.jobs, str) and self.jobs != "all":
            raise ValueError(
                f"jobs={self.jobs!r}: name the jobs to expand together, e.g. "
                "jobs=['orders-counter', 'orders-audit'], or jobs='all' (every managed job "
                "reading the topics, found when the run starts)"
            )
        if self.jobs is not None and not isinstance(self.jobs, str):
            if len(set(self.jobs)) != len(self.jobs) or not self.jobs:
                raise ValueError(f"jobs={list(self.jobs)!r}: name each job once")
        elif self.jobs is None and not self.job_name:
            raise ValueError(
                "job_name is empty - name the stateful job: job=JobSettings(name=...) (or "
                "JobSettings(jobs=[...]))"
            )
        if not self.topic_list():
            raise ValueError(
                "topics is empty - name the input topic(s) to expand: job=JobSettings(topics=...)"
            )
        if isinstance(self.policy, Mapping):  # InvalidPolicyError at parse time names the fix
            object.__setattr__(self, "policy", GrowthPolicy.from_dict(self.policy))
        object.__setattr__(
            self, "handover", restart.normalise_restart(self.handover, error=ValueError)
        )
        self._check_restart_task()
        if self.hot_standby and normalise_run_mode(self.run_mode) != "continuous":
            raise ValueError(
                "hot_standby=True needs run_mode='continuous' (an available-now run ends: "
                "there is nothing to fail over from)"
            )
        self._check_launch()

    @classmethod
    def of(cls, settings: ExpansionSettings | None, fields: Mapping[str, Any]) -> ExpansionSettings:
        """`settings`, or one built from keyword arguments (TypeError names an unknown one)."""
        if settings is not None and fields:
            return dataclasses.replace(settings, **fields)
        if settings is not None:
            return settings
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(fields) - known)
        if unknown:
            raise TypeError(
                f"unknown expansion setting(s) {unknown} - the settings are: {sorted(known)}"
            )
        return cls(**fields)

    def for_job(self, name: str) -> ExpansionSettings:
        """The settings of job `name` of a multi-job run (its ``per_job`` fields applied)."""
        own = self.per_job(name) if callable(self.per_job) else (self.per_job or {}).get(name)
        own = dict(own or {})
        known = {f.name for f in dataclasses.fields(self)} - {"jobs", "per_job", "co_jobs"}
        unknown = sorted(set(own) - known)
        if unknown:
            raise TypeError(f"per_job[{name!r}]: unknown setting(s) {unknown}")
        if not (own.get("application_args") or self.application_args):
            raise ValueError(
                f"job {name!r} has no application_args - give them in per_job[{name!r}]"
            )
        log_dir = os.path.join(self.log_dir, name) if self.log_dir else None
        return dataclasses.replace(
            self,
            **{"job_name": name, "log_dir": log_dir, "other_jobs": "include", **own},
            jobs=None,
            per_job=None,
            co_jobs=tuple(j for j in self.jobs or () if j != name),
        )

    @property
    def mode(self) -> str:
        return normalise_run_mode(self.run_mode)

    def _check_restart_task(self) -> None:
        if self.restart_task is None:
            return
        from airflow.sdk import BaseOperator

        if not (isinstance(self.restart_task, BaseOperator) or callable(self.restart_task)):
            raise ValueError(
                f"restart_task={self.restart_task!r}: give an operator that starts the job on "
                "its newest job model (e.g. a KubernetesPodOperator or a BashOperator calling "
                "your deploy script), or a callable job_name -> operator"
            )
        if isinstance(self.restart_task, BaseOperator) and self.jobs is not None:
            raise ValueError(
                "restart_task: with jobs=[...] give a callable job_name -> operator (one task "
                "per job), not one operator"
            )
        if self.mode != "continuous":
            raise ValueError("restart_task needs run_mode='continuous'")
        asked = restart.STRATEGIES.get(self.handover)
        if asked is not None and not asked.needs_task:
            raise ValueError(
                f"restart_task with handover={self.handover!r}: the restart task replaces the "
                "spark-submit launch - use handover='auto' (in place or in-app when the job "
                "can, else your task)"
            )

    def _check_launch(self) -> None:
        """A DAG that owns no launch asks for nothing that launches (checked per job)."""
        if self.jobs is not None or self.owns_launch:
            return
        name = f"job {self.job_name!r}"
        fix = (
            "name how to launch it: SparkSettings(application=...) (or application_args "
            "from stream_job_args for the shipped job), or RestartSettings(task=...)"
        )
        if self.mode != "continuous":
            raise ValueError(
                f"{name}: run_mode={self.run_mode!r} runs the job from the DAG (the drain and "
                f"the run on the new job model), but the DAG names no application - {fix}"
            )
        asked = restart.STRATEGIES.get(self.handover)
        if asked is not None and not asked.launches_nothing:
            raise ValueError(
                f"{name}: handover={self.handover!r} launches the job, but the DAG names no "
                f"application and no restart task - {fix}, or use handover='auto' (the job "
                "then switches in place or in-app, or the plan fails naming why)"
            )
        if self.hot_standby:
            raise ValueError(f"{name}: hot_standby=True launches a processor - {fix}")

    @property
    def restart_requested(self) -> str | None:
        """The restart the plan step is asked to choose (rule 1.8), or None: none is chosen
        (available-now runs, and ``cold`` as before: the steps then stop and launch). With a
        restart task: its strategy (in place or in-app still first when the job can)."""
        if self.mode != "continuous":
            return None
        if self.restart_task is not None:
            return next(m for m, s in restart.STRATEGIES.items() if s.needs_task)
        asked = restart.STRATEGIES.get(self.handover)
        if asked is not None and asked.capability is None:
            return None  # cold: nothing to choose
        return self.handover

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
    def warm_handover(self) -> bool:
        """The plan step chooses the restart (continuous mode; the steps follow the choice it
        records) and it may launch a standby early (the ``submit_standby`` task)."""
        return self.restart_requested is not None and any(
            s.launches_standby for s in self.may_choose()
        )

    def topic_list(self) -> list[str]:
        return [self.topics] if isinstance(self.topics, str) else list(self.topics)


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
