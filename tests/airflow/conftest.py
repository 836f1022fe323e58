"""Fixtures of the Airflow-surface tests: a temporary Airflow (SQLite, migrated once per
session), the ``kafka_default`` connection pointing at the test Kafka, jobs with a job model v1.

Run a DAG with ``run_dag_test(dag)`` from ``airflow_env`` (serializes it, then ``dag.test()``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import airflow_env  # noqa: I001 - sets AIRFLOW_HOME before anything imports airflow
import pytest

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore


@pytest.fixture(scope="session")
def airflow_home() -> str:
    """The temporary AIRFLOW_HOME, with its SQLite database migrated."""
    return str(airflow_env.migrate_airflow_db())


@pytest.fixture(scope="session")
def kafka_conn(kafka_bootstrap: str, airflow_home: str) -> Iterator[str]:
    """``kafka_default`` (env var AIRFLOW_CONN_KAFKA_DEFAULT) pointing at the test Kafka."""
    old = os.environ.get("AIRFLOW_CONN_KAFKA_DEFAULT")
    os.environ["AIRFLOW_CONN_KAFKA_DEFAULT"] = airflow_env.kafka_connection_env(kafka_bootstrap)
    yield "kafka_default"
    if old is None:
        os.environ.pop("AIRFLOW_CONN_KAFKA_DEFAULT", None)
    else:
        os.environ["AIRFLOW_CONN_KAFKA_DEFAULT"] = old


@pytest.fixture
def run_dag(kafka_conn: str) -> Callable[..., Any]:
    """``run_dag(dag, **dag_test_kwargs) -> DagRun``: serialize ``dag`` into the temporary
    metadata DB, then ``dag.test()`` it (deferred tasks run their trigger in line)."""
    return airflow_env.run_dag_test


@pytest.fixture(scope="session")
def kconfig(kafka_bootstrap: str) -> dict[str, str]:
    return client_config(kafka_bootstrap)


@pytest.fixture
def admin(kconfig: dict[str, str]) -> Iterator[KafkaAdmin]:
    with KafkaAdmin(kconfig, timeout_s=15) as client:
        yield client


@pytest.fixture
def job(
    kafka_conn: str, kconfig: dict[str, str], admin: KafkaAdmin, unique_topic: Callable[..., str]
) -> Callable[..., SimpleNamespace]:
    """Factory: ``job(partitions=2)`` creates an input topic and writes job model v1 for it."""
    stores: list[KafkaCoordinatorStore] = []

    def make(partitions: int = 2, *, write_model: bool = True) -> SimpleNamespace:
        name = f"job-{uuid.uuid4().hex[:10]}"
        topic = unique_topic("orders")
        admin.ensure_topic(topic, partitions)
        store = KafkaCoordinatorStore(kconfig, name)
        stores.append(store)
        model = None
        if write_model:
            model = store.write_job_model(JobModel.initial(name, {topic: partitions}))
        return SimpleNamespace(name=name, topic=topic, store=store, model=model, config=kconfig)

    yield make
    for store in stores:
        store.close()
