"""Example: check the topic every hour and expand it only when a growth policy says so.

A growth policy turns the schedule into a condition (SEP-5's own motivation): each run measures
the topic and the job, and grows the topic only when a figure crosses its threshold, by the
smallest power of two that brings it back under (capped by ``max_factor``). When nothing is
crossed the run's ``plan`` task ends *skipped* with the figures in its log: nothing written,
nothing grown. Thresholds and the job come from environment variables:

* ``SAMZA_EXPAND_POLICY_TOPIC`` (default ``orders``), ``SAMZA_EXPAND_JOB_NAME``
  (default ``orders-counter``), ``SAMZA_EXPAND_SCHEDULE`` (default ``@hourly``),
  ``SAMZA_EXPAND_GRACE_SECONDS`` (producer refresh grace, default 300);
* ``SAMZA_EXPAND_MAX_PARTITION_BYTES`` (default 1 GiB),
  ``SAMZA_EXPAND_MAX_RECORDS_PER_S_PER_PARTITION`` (default 5000),
  ``SAMZA_EXPAND_MAX_LAG_RECORDS`` (default 1,000,000, counted while the lag grows over
  ``SAMZA_EXPAND_LAG_GROWING_FOR_S``, default 60), ``SAMZA_EXPAND_MAX_FACTOR`` (default 4);
* the job settings of ``samza_expand.py`` (``SAMZA_EXPAND_BOOTSTRAP_SERVERS``,
  ``SAMZA_EXPAND_CHECKPOINT_ROOT``, ``SAMZA_EXPAND_OUTPUT_TOPIC``, ``SAMZA_EXPAND_RUN_MODE``).

The manual form of ``samza_expand`` keeps its factor; this DAG is the scheduled companion.
"""

from __future__ import annotations

import os

from airflow_samza_expand.core.policy import GrowthPolicy
from airflow_samza_expand.dags import (
    BarrierSettings,
    GrowthSettings,
    JobSettings,
    build_expansion_dag,
    stream_job_args_from_env,
)

TOPIC = os.environ.get("SAMZA_EXPAND_POLICY_TOPIC", "orders")
JOB = os.environ.get("SAMZA_EXPAND_JOB_NAME", "orders-counter")

POLICY = GrowthPolicy(
    max_partition_bytes=int(os.environ.get("SAMZA_EXPAND_MAX_PARTITION_BYTES", str(2**30))),
    max_records_per_s_per_partition=float(
        os.environ.get("SAMZA_EXPAND_MAX_RECORDS_PER_S_PER_PARTITION", "5000")
    ),
    max_lag_records=int(os.environ.get("SAMZA_EXPAND_MAX_LAG_RECORDS", "1000000")),
    lag_growing_for_s=float(os.environ.get("SAMZA_EXPAND_LAG_GROWING_FOR_S", "60")),
    max_factor=int(os.environ.get("SAMZA_EXPAND_MAX_FACTOR", "4")),
)

dag = build_expansion_dag(
    "samza_expand_on_schedule",
    schedule=os.environ.get("SAMZA_EXPAND_SCHEDULE", "@hourly"),
    job=JobSettings(
        name=JOB,
        topics=[TOPIC],
        run_mode=os.environ.get("SAMZA_EXPAND_RUN_MODE", "continuous"),
        application_args=stream_job_args_from_env(JOB),
    ),
    barrier=BarrierSettings(
        producer_refresh_grace_s=float(os.environ.get("SAMZA_EXPAND_GRACE_SECONDS", "300")),
    ),
    growth=GrowthSettings(policy=POLICY),
    doc_md=__doc__,
)
