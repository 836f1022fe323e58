"""Fixtures of the end-to-end tests: the shared Kafka (tests/conftest.py), a temporary Airflow
(tests/airflow/airflow_env.py, reused as is), the kafka_default and spark_default connections
(local[2]), and a factory of `Scenario`s that cleans up the jobs it started."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "airflow"))
import airflow_env  # noqa: E402,I001 - sets a temporary AIRFLOW_HOME before airflow is imported

import pytest  # noqa: E402
from e2e_settings import E2E_GRACE_S, E2E_POLL_S, E2E_TRIGGER  # noqa: E402

pytest.importorskip("pyspark")


@pytest.fixture(scope="session")
def e2e_airflow(kafka_bootstrap: str) -> Iterator[str]:
    """Migrated temporary Airflow with kafka_default -> test Kafka, spark_default -> local[2]."""
    from airflow_samza_expand._demo.jobs import spark_connection_env, spark_env

    airflow_env.migrate_airflow_db()
    saved = {
        k: os.environ.get(k)
        for k in ("AIRFLOW_CONN_KAFKA_DEFAULT", "AIRFLOW_CONN_SPARK_DEFAULT", "PATH")
    }
    os.environ["AIRFLOW_CONN_KAFKA_DEFAULT"] = airflow_env.kafka_connection_env(kafka_bootstrap)
    os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = spark_connection_env("local[2]")
    os.environ["PATH"] = spark_env()["PATH"]
    yield str(airflow_env.AIRFLOW_HOME)
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture
def scenario(e2e_airflow: str, kafka_bootstrap: str, tmp_path: Path) -> Iterator[Callable]:
    """``scenario(run_mode=..., naive=...)`` -> a set-up `Scenario`; closed after the test."""
    from airflow_samza_expand._demo.scenario import Scenario, ScenarioConfig

    made: list[Scenario] = []

    def make(**kwargs) -> Scenario:
        kwargs.setdefault("trigger", E2E_TRIGGER)
        kwargs.setdefault("grace_s", E2E_GRACE_S)
        kwargs.setdefault("poll_s", E2E_POLL_S)
        cfg = ScenarioConfig(
            bootstrap=kafka_bootstrap, work_dir=tmp_path / f"s{len(made)}", **kwargs
        )
        s = Scenario(
            cfg,
            run_dag=airflow_env.run_dag_test,
            task_states=airflow_env.task_states,
            xcom=airflow_env.task_instance_xcom,
            log=lambda line: print(f"[e2e] {line}", flush=True),
        )
        made.append(s)
        s.setup()
        return s

    yield make
    for s in made:
        s.close()
