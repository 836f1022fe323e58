"""Example: finish an expansion by itself when someone grows the topic outside Airflow.

An ``AssetWatcher`` with ``PartitionCountChangeTrigger`` watches the topic; when its partition
count changes (``kafka-topics --alter --partitions``), the DAG runs the ordering barrier, writes
the job model for the live count and restarts the job. Configured by environment variables:
``SAMZA_EXPAND_WATCH_TOPIC`` (default ``orders``), ``SAMZA_EXPAND_JOB_NAME`` (default
``orders-counter``), ``SAMZA_EXPAND_GRACE_SECONDS`` (default 300), and the job settings of
``samza_expand.py`` (``SAMZA_EXPAND_BOOTSTRAP_SERVERS``, ``SAMZA_EXPAND_CHECKPOINT_ROOT``,
``SAMZA_EXPAND_OUTPUT_TOPIC``, ``SAMZA_EXPAND_RUN_MODE``).
"""

from __future__ import annotations

import os

from airflow.sdk import Asset, AssetWatcher

from airflow_samza_expand.airflow.triggers import PartitionCountChangeTrigger
from airflow_samza_expand.dags import (
    BarrierSettings,
    GrowthSettings,
    JobSettings,
    build_expansion_dag,
    stream_job_args_from_env,
)

TOPIC = os.environ.get("SAMZA_EXPAND_WATCH_TOPIC", "orders")
JOB = os.environ.get("SAMZA_EXPAND_JOB_NAME", "orders-counter")

topic_partitions = Asset(
    name=f"kafka_partitions_{TOPIC}",
    uri=f"kafka://default/{TOPIC}",
    watchers=[
        AssetWatcher(
            name=f"{TOPIC}_partition_count",
            trigger=PartitionCountChangeTrigger(topic=TOPIC, job_name=JOB, poll_interval_s=30.0),
        )
    ],
)

dag = build_expansion_dag(
    "samza_expand_on_partition_change",
    schedule=[topic_partitions],
    job=JobSettings(
        name=JOB,
        topics=[TOPIC],
        run_mode=os.environ.get("SAMZA_EXPAND_RUN_MODE", "continuous"),
        application_args=stream_job_args_from_env(JOB),
    ),
    barrier=BarrierSettings(
        producer_refresh_grace_s=float(os.environ.get("SAMZA_EXPAND_GRACE_SECONDS", "300")),
    ),
    growth=GrowthSettings(follow_live_counts=True),
    doc_md=__doc__,
)
