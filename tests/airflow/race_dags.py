"""Factory DAGs of the ownership tests: the shipped chain with the fake ``spark-submit``
(`fake_spark_submit.py`) as the job, short waits, no retries."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow_samza_expand.dags import build_expansion_dag, stream_job_args


def build(
    *,
    dag_id: str,
    job_name: str,
    topic: str,
    bootstrap: str,
    log_dir: str,
    follow_live_counts: bool = False,
    dry_run: bool = False,
    spark_conf: dict[str, Any] | None = None,
    **settings: Any,
):
    fields: dict[str, Any] = {  # short waits, no retries; `settings` may override them
        "producer_refresh_grace_s": 0.0,
        "barrier_timeout_s": 120.0,
        "poll_interval_s": 0.5,
        "stop_timeout_s": 60.0,
        "ack_timeout_s": 120.0,
        "check_partitioner": False,
        "retries": 0,
        "retry_delay": timedelta(seconds=1),
        **settings,
    }
    return build_expansion_dag(
        dag_id,
        job_name=job_name,
        topics=[topic],
        follow_live_counts=follow_live_counts,
        dry_run=dry_run,
        spark_conf=spark_conf,
        log_dir=log_dir,
        application_args=stream_job_args(
            job_name=job_name,
            bootstrap_servers=bootstrap,
            checkpoint_dir=f"{log_dir}/checkpoint",
            output_topic=f"{topic}-out",
        ),
        **fields,
    )
