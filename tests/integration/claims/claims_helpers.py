"""Helpers of the claim tests: the factory's DAG for a job, running part of it with
`dag.test()`, reading task tries, producing keyed records."""

from __future__ import annotations

import os
import zlib
from collections.abc import Mapping
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import airflow_env  # tests/airflow, put on sys.path by tests/integration/claims/conftest.py


def point_kafka_default(bootstrap: str) -> None:
    """Airflow's ``kafka_default`` connection -> ``bootstrap`` (an AIRFLOW_CONN_ variable)."""
    os.environ["AIRFLOW_CONN_KAFKA_DEFAULT"] = airflow_env.kafka_connection_env(bootstrap)


def expansion_dag(
    job: SimpleNamespace,
    dag_id: str | None = None,
    topics: str | None = None,
    **overrides: Mapping[str, Any],
) -> Any:
    """The factory's DAG for ``job`` (x2, on ``topics``: default its topic), with Airflow
    retries (2, 1 s apart) and short waits; ``overrides``: a group's fields as
    ``group={field: value}``."""
    from airflow_samza_expand import dags

    args = dags.stream_job_args(
        job_name=job.name, checkpoint_dir="/nonexistent", output_topic="unused"
    )
    settings = dags.ExpansionSettings(
        job=dags.JobSettings(name=job.name, topics=topics or job.topic, application_args=args),
        barrier=dags.BarrierSettings(producer_refresh_grace_s=0.5, barrier_timeout_s=60.0),
        poll_interval_s=0.5,
        retries=2,
        retry_delay=timedelta(seconds=1),
    ).with_fields(overrides, "expansion_dag")
    return dags.build_expansion_dag(dag_id or f"claims_{job.name.replace('-', '_')}", settings)


def run_until(dag: Any, task_id: str, *, rerun_of: Any = None) -> Any:
    """Run ``dag`` up to ``task_id`` (and its upstream) with ``dag.test()``; the DagRun.

    ``rerun_of``: a DagRun of the same DAG to run again under its run id, as clearing it in
    the UI does (``dag.test()`` replaces the run of the same logical date).
    """
    subset = dag.partial_subset(task_ids=[task_id], include_upstream=True)
    same_run = (
        {"logical_date": rerun_of.logical_date, "run_after": rerun_of.run_after}
        if rerun_of is not None
        else {}
    )
    return airflow_env.run_dag_test(subset, **same_run)


def tries(dag_run: Any) -> dict[str, tuple[str, int]]:
    """task_id -> (final state, try number) of every task instance of ``dag_run``."""
    from airflow.utils.session import create_session

    with create_session() as session:
        return {
            ti.task_id: (str(ti.state), ti.try_number)
            for ti in dag_run.get_task_instances(session=session)
        }


def produce_keyed(
    config: Mapping[str, str], topic: str, keys: list[str], *, partition_count: int | None = None
) -> None:
    """One record per key, placed by librdkafka's default partitioner, or (``partition_count``
    given) at ``crc32(key) + 1 mod N``: what a custom partitioner might do."""
    from confluent_kafka import Producer

    producer = Producer({**config, "linger.ms": 5})
    for key in keys:
        extra = {}
        if partition_count is not None:
            extra["partition"] = (zlib.crc32(key.encode()) + 1) % partition_count
        producer.produce(topic, key=key.encode(), value=b"v", **extra)
        producer.poll(0)
    assert producer.flush(30) == 0, "records not delivered"
