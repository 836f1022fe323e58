"""Factory DAGs of the ownership tests: the shipped chain with the fake ``spark-submit``
(`fake_spark_submit.py`) as the job, short waits, no retries."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from airflow_samza_expand import dags


def build(
    *,
    dag_id: str,
    job_name: str,
    topic: str,
    bootstrap: str,
    log_dir: str,
    spark_conf: dict[str, Any] | None = None,
    **settings: Any,
):
    """``settings``: a group's fields as ``group={field: value}`` (JSON, as `dag_runner`
    passes them), or a step setting (``dry_run``, ``retries``, ...); they replace the short
    waits below."""
    args = dags.stream_job_args(
        job_name=job_name,
        bootstrap_servers=bootstrap,
        checkpoint_dir=f"{log_dir}/checkpoint",
        output_topic=f"{topic}-out",
    )
    base = dags.ExpansionSettings(  # short waits, no retries
        job=dags.JobSettings(name=job_name, topics=[topic], application_args=args),
        spark=dags.SparkSettings(conf=spark_conf, log_dir=log_dir),
        barrier=dags.BarrierSettings(producer_refresh_grace_s=0.0, barrier_timeout_s=120.0),
        restart=dags.RestartSettings(stop_timeout_s=60.0, ack_timeout_s=120.0),
        kafka=dags.KafkaSettings(check_partitioner=False),
        poll_interval_s=0.5,
        retries=0,
        retry_delay=timedelta(seconds=1),
    )
    groups = {k: v for k, v in settings.items() if isinstance(v, dict)}
    steps = {k: v for k, v in settings.items() if k not in groups}
    resolved = dataclasses.replace(base.with_fields(groups, dag_id), **steps)
    return dags.build_expansion_dag(dag_id, resolved)
