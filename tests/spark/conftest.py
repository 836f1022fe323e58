"""Spark fixtures: one local[2] SparkSession shared by every Spark test."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A small local[2] session shared by every Spark test (the JVM starts once)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    try:  # Spark's Kafka source for the runtime's read_kafka() (scripts/setup.sh fetches it)
        from airflow_samza_expand._testing.spark_kafka import connector_jars

        builder = builder.config("spark.jars", ",".join(connector_jars()))
    except RuntimeError as exc:  # no Maven: the tests on Spark's Kafka source skip
        logging.getLogger(__name__).warning("no Spark Kafka connector: %s", exc)
    from airflow_samza_expand.spark._python_workers import PYTHON_WORKER_CONF

    for key, value in PYTHON_WORKER_CONF.items():  # as the shipped job starts its application
        builder = builder.config(key, value)
    session = (
        builder.master("local[2]")
        .appName("airflow-samza-expand-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.streaming.noDataProgressEventInterval", "1000")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    yield session
    session.stop()
    # py4j closes leftover gateway connections in __del__ at interpreter exit, after pytest has
    # closed the log streams; its INFO line there only prints a "Logging error" traceback.
    logging.getLogger("py4j").setLevel(logging.WARNING)
