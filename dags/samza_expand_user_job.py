"""Example: expand the input topic of *your own* stateful PySpark job, built on the runtime.

The application is ``airflow_samza_expand/examples/user_job.py``: Spark's Kafka source read
through ``spark.runtime`` (three lines), per-key state in ``applyInPandasWithState``, results
to a Kafka topic. Because it runs on the runtime it takes the DAG's flags
(``SparkSettings(application_on_runtime=True)``: the available-now trigger, the order check
of stale placements) and advertises the standby capability, so the default restart
(``RestartSettings(restart="auto")``) is the warm
restart. Spark's Kafka connector comes from Maven Central through ``spark.jars.packages``
(``spark-submit --packages``) for ``SAMZA_EXPAND_SPARK_VERSION`` (default: the installed
pyspark's version). Settings come from the
environment of the Airflow workers, as in ``samza_expand.py``: ``SAMZA_EXPAND_BOOTSTRAP_SERVERS``,
``SAMZA_EXPAND_CHECKPOINT_ROOT``, ``SAMZA_EXPAND_OUTPUT_TOPIC``, ``SAMZA_EXPAND_RUN_MODE``, plus
``SAMZA_EXPAND_USER_JOB_NAME`` (default ``orders-user-counter``) and
``SAMZA_EXPAND_USER_TOPIC`` (default ``orders``).
"""

from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, version

import airflow_samza_expand
from airflow_samza_expand.dags import (
    GrowthSettings,
    JobSettings,
    SparkSettings,
    build_expansion_dag,
    stream_job_args_from_env,
)

JOB = os.environ.get("SAMZA_EXPAND_USER_JOB_NAME", "orders-user-counter")
USER_JOB = os.path.join(os.path.dirname(airflow_samza_expand.__file__), "examples", "user_job.py")
try:  # the connector must match the cluster's Spark: SAMZA_EXPAND_SPARK_VERSION, else pyspark's
    SPARK_VERSION = os.environ.get("SAMZA_EXPAND_SPARK_VERSION") or version("pyspark")
except PackageNotFoundError:
    SPARK_VERSION = "4.2.0"
SPARK_KAFKA = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{SPARK_VERSION}"

dag = build_expansion_dag(
    "samza_expand_user_job",
    job=JobSettings(
        name=JOB,
        topics=[os.environ.get("SAMZA_EXPAND_USER_TOPIC", "orders")],
        run_mode=os.environ.get("SAMZA_EXPAND_RUN_MODE", "continuous"),
        application_args=stream_job_args_from_env(JOB),
    ),
    spark=SparkSettings(
        application=USER_JOB,
        application_on_runtime=True,
        conf={"spark.jars.packages": SPARK_KAFKA},
    ),
    growth=GrowthSettings(factor=2),
)
