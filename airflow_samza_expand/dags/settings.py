"""`ExpansionSettings`: everything the expansion chain needs, given once and shared by
`build_expansion_dag` and `expansion_task_group` (as astronomer-cosmos shares one converter
between ``DbtDag`` and ``DbtTaskGroup``). Each field is a documented factory argument
(README "DAG factory"); numbers and booleans a user may set in a trigger form may be Jinja
templates such as ``"{{ params.factor }}"``."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator

from airflow_samza_expand.airflow.operators.submit import normalise_run_mode
from airflow_samza_expand.airflow.operators.write_model import WriteJobModelOperator
from airflow_samza_expand.core.plan import DEFAULT_MAX_PARTITIONS
from airflow_samza_expand.protocol.ownership import DEFAULT_LEASE_TTL_S

DEFAULT_APPLICATION = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "spark", "job.py"
)


@dataclass(frozen=True)
class ExpansionSettings:
    """The expansion of one stateful job (see the README for each field)."""

    job_name: str
    topics: str | Sequence[str]
    application_args: Sequence[str]
    factor: int | str = 2
    targets: Mapping[str, int] | None = None
    follow_live_counts: bool = False
    run_mode: str = "continuous"
    kafka_conn_id: str = "kafka_default"
    spark_conn_id: str = "spark_default"
    application: str = DEFAULT_APPLICATION
    drain_application_args: Sequence[str] | None = None
    spark_conf: Mapping[str, Any] | None = None
    spark_env_vars: Mapping[str, Any] | None = None
    spark_submit_kwargs: Mapping[str, Any] | None = None
    coordinator: str = "kafka"
    consumer_group: str | None = None
    producer_refresh_grace_s: float | str = 300.0
    barrier_timeout_s: float | str = 3600.0
    stop_timeout_s: float = 600.0
    ack_timeout_s: float = 1800.0
    poll_interval_s: float = 10.0
    dry_run: bool | str = False
    check_partitioner: bool = True
    max_partitions: int | str = DEFAULT_MAX_PARTITIONS
    lease_ttl_s: float = DEFAULT_LEASE_TTL_S
    write_job_model_operator: type[BaseOperator] = WriteJobModelOperator
    retries: int = 2
    retry_delay: timedelta = field(default=timedelta(seconds=30))
    log_dir: str | None = None

    def __post_init__(self) -> None:
        normalise_run_mode(self.run_mode)  # a clear error at parse time
        if not self.topic_list():
            raise ValueError("topics is empty - name the input topic(s) to expand")

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

    @property
    def mode(self) -> str:
        return normalise_run_mode(self.run_mode)

    def topic_list(self) -> list[str]:
        return [self.topics] if isinstance(self.topics, str) else list(self.topics)


__all__ = ["DEFAULT_APPLICATION", "ExpansionSettings"]
