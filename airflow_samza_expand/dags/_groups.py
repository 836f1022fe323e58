"""The factory's settings, in groups as astronomer-cosmos groups ``DbtDag``'s (``ProjectConfig``,
``ProfileConfig``, ...): ``build_expansion_dag(..., job=JobSettings(...), kafka=KafkaSettings(...),
spark=SparkSettings(...), barrier=BarrierSettings(...), restart=RestartSettings(...),
ownership=OwnershipSettings(...), growth=GrowthSettings(...))``. `ExpansionSettings` is these
groups and the few settings about the steps themselves; each field and its default is declared
once, here, the default taken from the layer that owns it (the protocol's steps).

A field has the name the operators give it (``kafka_config_id``, ``barrier_timeout_s``,
``restart``); the Spark group's are ``SparkSubmitOperator``'s (``conn_id``, ``conf``, ...). A
mode (``run_mode``, ``restart``, ``on_stale_placement``, ``other_jobs``) is an enum of
`core._modes` (`RunMode`, `Restart`, ...) or its name as a string.

Imported without Airflow (``from airflow_samza_expand.dags import JobSettings``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_samza_expand._protocol.barrier.wait import (
    DEFAULT_BARRIER_TIMEOUT_S,
    DEFAULT_PRODUCER_REFRESH_GRACE_S,
)
from airflow_samza_expand._protocol.ownership import DEFAULT_LEASE_TTL_S
from airflow_samza_expand._protocol.steps.ack import DEFAULT_ACK_TIMEOUT_S
from airflow_samza_expand._protocol.steps.plan.wait import DEFAULT_JOB_DOWN_TIMEOUT_S
from airflow_samza_expand._protocol.steps.stop import (
    DEFAULT_STANDBY_WARM_TIMEOUT_S,
    DEFAULT_STOP_TIMEOUT_S,
)
from airflow_samza_expand.core._modes import OnStalePlacement, OtherJobs, Restart, RunMode
from airflow_samza_expand.core._plan import DEFAULT_MAX_PARTITIONS
from airflow_samza_expand.core.policy import GrowthPolicy

DEFAULT_APPLICATION = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "spark", "job.py"
)


@dataclass(frozen=True)
class JobSettings:
    """The stateful job: its name (also its consumer group and coordinator topic unless
    ``consumer_group`` says otherwise), the input topics to grow, its command line, its run
    mode; or several jobs reading the topics (``jobs``, each one's own fields in ``per_job``:
    ``{job: {group: {field: value}}}``, e.g. ``{"a": {"job": {"application_args": [...]}}}``,
    or a function job -> that mapping)."""

    name: str = ""
    topics: str | Sequence[str] = ()
    application_args: Sequence[str] = ()
    drain_application_args: Sequence[str] | None = None  # available-now: the drain run's
    consumer_group: str | None = None
    run_mode: RunMode | str = RunMode.CONTINUOUS
    jobs: Sequence[str] | str | None = None  # [names], or "all" (found at run time)
    per_job: Mapping[str, Mapping[str, Any]] | Callable[[str], Mapping[str, Any]] | None = None


@dataclass(frozen=True)
class KafkaSettings:
    """The Kafka side: the Airflow connection, the coordinator store, the partitioner check."""

    kafka_config_id: str = "kafka_default"  # the Kafka connection, as the operators name it
    coordinator: str = "kafka"  # "kafka", "kafka://<topic>", a path or an fsspec URL
    check_partitioner: bool = True  # refuse topics not placed by hash(key) % N


@dataclass(frozen=True)
class SparkSettings:
    """How spark-submit launches the job (submit, drain and standby steps). ``application``
    None: the shipped job for a DAG whose ``application_args`` come from ``stream_job_args``,
    else none - the DAG then never launches the job (without a restart task)."""

    conn_id: str = "spark_default"
    application: str | None = None
    # built on airflow_samza_expand.spark.runtime: it takes the runtime's flags
    application_on_runtime: bool = False
    conf: Mapping[str, Any] | None = None
    env_vars: Mapping[str, Any] | None = None
    submit_kwargs: Mapping[str, Any] | None = None  # more SparkSubmitOperator arguments
    log_dir: str | None = None  # of a detached launch


@dataclass(frozen=True)
class BarrierSettings:
    """The ordering barrier and the proof of order (docs/job-model.md)."""

    producer_refresh_grace_s: float | str = DEFAULT_PRODUCER_REFRESH_GRACE_S
    barrier_timeout_s: float | str = DEFAULT_BARRIER_TIMEOUT_S
    stale_quiet_s: float | str | None = None  # None: the barrier's default
    on_stale_placement: OnStalePlacement | str = OnStalePlacement.WARN


@dataclass(frozen=True)
class RestartSettings:
    """How the job takes job model vN+1 and the waits of the plan, stop and ack steps."""

    restart: Restart | str = Restart.AUTO
    # starts the job on vN+1 instead of spark-submit: an operator, or job name -> operator
    task: Any = None
    hot_standby: bool = False  # a second vN+1 processor waiting for the lease (failover)
    # a DAG that owns no launch: how long the plan waits for a job that is down to come back
    job_down_timeout_s: float = DEFAULT_JOB_DOWN_TIMEOUT_S
    stop_timeout_s: float = DEFAULT_STOP_TIMEOUT_S
    standby_warm_timeout_s: float = DEFAULT_STANDBY_WARM_TIMEOUT_S
    ack_timeout_s: float = DEFAULT_ACK_TIMEOUT_S


@dataclass(frozen=True)
class OwnershipSettings:
    """The run's expansion lease and the other managed jobs reading the topics."""

    lease_ttl_s: float = DEFAULT_LEASE_TTL_S
    other_jobs: OtherJobs | str = OtherJobs.REFUSE
    managed_jobs: Sequence[str] | None = None  # the jobs to check (default: discovered)
    co_jobs: Sequence[str] = ()  # set by the factory: the other jobs the same run expands


@dataclass(frozen=True)
class GrowthSettings:
    """How much the topics grow: by ``factor``, to ``targets`` ({topic: count}), to the live
    counts (``follow_live_counts``: a DAG finishing a growth made outside Airflow), or when a
    growth ``policy`` says so; never beyond ``max_partitions``."""

    factor: int | str = 2
    targets: Mapping[str, int] | None = None
    follow_live_counts: bool = False
    policy: GrowthPolicy | Mapping[str, Any] | None = None
    max_partitions: int | str = DEFAULT_MAX_PARTITIONS


GROUPS: dict[str, type] = {
    "job": JobSettings,
    "kafka": KafkaSettings,
    "spark": SparkSettings,
    "barrier": BarrierSettings,
    "restart": RestartSettings,
    "ownership": OwnershipSettings,
    "growth": GrowthSettings,
}


__all__ = [
    "DEFAULT_APPLICATION",
    "GROUPS",
    "BarrierSettings",
    "GrowthSettings",
    "JobSettings",
    "KafkaSettings",
    "OnStalePlacement",
    "OtherJobs",
    "OwnershipSettings",
    "Restart",
    "RestartSettings",
    "RunMode",
    "SparkSettings",
]
