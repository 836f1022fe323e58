"""Fixtures of the claim tests: what the README promises, checked through the public surface
only (the DAG factory run with `dag.test()`, the public operators and triggers, coordinator
records read through `open_store`, Kafka state), so the tests survive rewrites of the internals.

Airflow runs in the temporary home of tests/airflow/airflow_env.py (imported before Airflow).
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "airflow"))
import airflow_env  # noqa: E402,I001 - sets a temporary AIRFLOW_HOME before airflow is imported

import pytest  # noqa: E402

from airflow_samza_expand.core.model import JobModel  # noqa: E402
from airflow_samza_expand._kafka.admin import KafkaAdmin  # noqa: E402
from airflow_samza_expand._kafka.config import client_config  # noqa: E402
from airflow_samza_expand.store import open_store  # noqa: E402
from claims_helpers import point_kafka_default  # noqa: E402


@pytest.fixture
def kafka_default(kafka_bootstrap: str) -> Iterator[str]:
    """``kafka_default`` points at the session's Kafka for the test (restored after)."""
    airflow_env.migrate_airflow_db()
    saved = os.environ.get("AIRFLOW_CONN_KAFKA_DEFAULT")
    point_kafka_default(kafka_bootstrap)
    yield kafka_bootstrap
    if saved is None:
        os.environ.pop("AIRFLOW_CONN_KAFKA_DEFAULT", None)
    else:
        os.environ["AIRFLOW_CONN_KAFKA_DEFAULT"] = saved


@pytest.fixture
def make_job(unique_topic: Callable[..., str]) -> Iterator[Callable[..., SimpleNamespace]]:
    """``make_job(bootstrap, partitions=2, model=None)``: an input topic and job model v1
    (``model(job_name, topic) -> JobModel`` to write another v1). Returns name, topic, config."""
    stores: list[Any] = []

    def make(
        bootstrap: str, partitions: int = 2, model: Callable[..., JobModel] | None = None
    ) -> SimpleNamespace:
        name = f"job-{uuid.uuid4().hex[:10]}"
        topic = unique_topic("orders")
        config = client_config(bootstrap)
        with KafkaAdmin(config, timeout_s=15) as admin:
            admin.ensure_topic(topic, partitions)
        store = open_store("kafka", name, kafka_config=config)
        stores.append(store)
        v1 = model(name, topic) if model else JobModel.initial(name, {topic: partitions})
        store.write_job_model(v1)
        return SimpleNamespace(name=name, topic=topic, config=config, store=store, v1=v1)

    yield make
    for store in stores:
        store.close()
