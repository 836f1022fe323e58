"""The factory's settings in groups, as astronomer-cosmos groups ``DbtDag``'s (``ProjectConfig``,
``ProfileConfig``, ...): ``build_expansion_dag(..., job=JobSettings(...), kafka=KafkaSettings(...),
spark=SparkSettings(...), barrier=BarrierSettings(...), restart=RestartSettings(...),
ownership=OwnershipSettings(...))``. What is about the DAG itself - the growth (``factor``,
``targets``, ``follow_live_counts``, ``policy``, ``max_partitions``), ``dry_run``,
``poll_interval_s`` (every wait of the chain), ``retries``, ``retry_delay``,
``write_job_model_operator`` - stays a keyword of its own.

A group field is the flat keyword without the group's prefix where it had one
(``barrier_timeout_s`` -> ``BarrierSettings.timeout_s``, `FLAT_NAMES`); the flat keywords of a
group still work for one release, each with a ``DeprecationWarning`` naming its replacement
(`flatten`). The factory resolves groups and keywords into one `ExpansionSettings`.

Imported without Airflow (``from airflow_samza_expand.dags import JobSettings``)."""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from airflow_samza_expand._protocol import restart
from airflow_samza_expand._protocol.ownership import DEFAULT_LEASE_TTL_S

DEFAULT_APPLICATION = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "spark", "job.py"
)


@dataclass(frozen=True)
class JobSettings:
    """The stateful job: its name (also its consumer group and coordinator topic unless
    ``consumer_group`` says otherwise), the input topics to grow, its command line, its run
    mode; or several jobs reading the topics (``jobs``, each one's own fields in ``per_job``,
    named as `ExpansionSettings` fields)."""

    name: str = ""
    topics: str | Sequence[str] = ()
    application_args: Sequence[str] = ()
    drain_application_args: Sequence[str] | None = None  # available-now: the drain run's
    consumer_group: str | None = None
    run_mode: str = "continuous"  # or "available-now"
    jobs: Sequence[str] | str | None = None  # [names], or "all" (found at run time)
    per_job: Mapping[str, Mapping[str, Any]] | Callable[[str], Mapping[str, Any]] | None = None

    FLAT: ClassVar[Mapping[str, str]] = {"name": "job_name"}


@dataclass(frozen=True)
class KafkaSettings:
    """The Kafka side: the Airflow connection, the coordinator store, the partitioner check."""

    config_id: str = "kafka_default"  # the Kafka connection (the operators' kafka_config_id)
    coordinator: str = "kafka"  # "kafka", "kafka://<topic>", a path or an fsspec URL
    check_partitioner: bool = True  # refuse topics not placed by hash(key) % N

    FLAT: ClassVar[Mapping[str, str]] = {"config_id": "kafka_config_id"}


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

    FLAT: ClassVar[Mapping[str, str]] = {
        "conn_id": "spark_conn_id",
        "conf": "spark_conf",
        "env_vars": "spark_env_vars",
        "submit_kwargs": "spark_submit_kwargs",
    }


@dataclass(frozen=True)
class BarrierSettings:
    """The ordering barrier and the proof of order (rule 1.5)."""

    producer_refresh_grace_s: float | str = 300.0
    timeout_s: float | str = 3600.0
    stale_quiet_s: float | str | None = None  # None: the barrier's default
    on_stale_placement: str = "warn"  # or "fail"

    FLAT: ClassVar[Mapping[str, str]] = {"timeout_s": "barrier_timeout_s"}


@dataclass(frozen=True)
class RestartSettings:
    """How the job takes job model vN+1 (rule 1.8) and the waits of the stop and ack steps."""

    handover: str = restart.AUTO  # "auto", "in-place", "in-app", "warm", "cold"
    # starts the job on vN+1 instead of spark-submit: an operator, or job name -> operator
    task: Any = None
    hot_standby: bool = False  # a second vN+1 processor waiting for the lease (failover)
    # a DAG that owns no launch: how long the plan waits for a job that is down to come back
    job_down_timeout_s: float = 600.0
    stop_timeout_s: float = 600.0
    standby_warm_timeout_s: float = 600.0
    ack_timeout_s: float = 1800.0

    FLAT: ClassVar[Mapping[str, str]] = {"task": "restart_task"}


@dataclass(frozen=True)
class OwnershipSettings:
    """The run's expansion lease and the other managed jobs reading the topics."""

    lease_ttl_s: float = DEFAULT_LEASE_TTL_S
    other_jobs: str = "refuse"  # or "include", "ignore"
    managed_jobs: Sequence[str] | None = None  # the jobs to check (default: discovered)

    FLAT: ClassVar[Mapping[str, str]] = {}


GROUPS: dict[str, type] = {
    "job": JobSettings,
    "kafka": KafkaSettings,
    "spark": SparkSettings,
    "barrier": BarrierSettings,
    "restart": RestartSettings,
    "ownership": OwnershipSettings,
}
# flat keyword -> (group argument, group field); kafka_conn_id: the older deprecated spelling
FLAT_NAMES: dict[str, tuple[str, str]] = {
    cls.FLAT.get(f.name, f.name): (group, f.name)
    for group, cls in GROUPS.items()
    for f in dataclasses.fields(cls)
}
FLAT_NAMES["kafka_conn_id"] = ("kafka", "config_id")


def group_fields(group: Any) -> dict[str, Any]:
    """The flat (`ExpansionSettings`) fields of a group instance."""
    renamed = type(group).FLAT
    return {renamed.get(f.name, f.name): getattr(group, f.name) for f in dataclasses.fields(group)}


def flatten(caller: str, groups: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    """The flat `ExpansionSettings` fields of ``groups`` (None: not given) and keywords
    ``fields``. A keyword of a given group is refused (ValueError naming both, nothing is
    built); each keyword of a group warns once (DeprecationWarning naming its replacement)."""
    given = {name: group for name, group in groups.items() if group is not None}
    for name, group in given.items():
        if not isinstance(group, GROUPS[name]):
            raise TypeError(f"{caller}({name}={group!r}): pass {name}={GROUPS[name].__name__}(...)")
    for key in fields:
        if key in FLAT_NAMES and FLAT_NAMES[key][0] in given:
            name, attr = FLAT_NAMES[key]
            raise ValueError(
                f"{caller}: {key}=... and {name}={GROUPS[name].__name__}(...) both given - "
                f"{key} is {name}.{attr}: give it once, in {GROUPS[name].__name__}({attr}=...)"
            )
    flat = dict(fields)
    for key in fields:
        if key in FLAT_NAMES:
            name, attr = FLAT_NAMES[key]
            warnings.warn(
                f"{caller}({key}=...) is deprecated: pass "
                f"{name}={GROUPS[name].__name__}({attr}=...)",
                DeprecationWarning,
                stacklevel=3,  # the caller of build_expansion_dag / expansion_task_group
            )
    if "kafka_conn_id" in flat:  # as before: the old spelling wins
        flat["kafka_config_id"] = flat.pop("kafka_conn_id")
    for group in given.values():
        flat.update(group_fields(group))
    return flat


__all__ = [
    "DEFAULT_APPLICATION",
    "FLAT_NAMES",
    "GROUPS",
    "BarrierSettings",
    "JobSettings",
    "KafkaSettings",
    "OwnershipSettings",
    "RestartSettings",
    "SparkSettings",
    "flatten",
    "group_fields",
]
