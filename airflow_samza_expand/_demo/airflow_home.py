"""A throwaway Airflow for the demo: temporary AIRFLOW_HOME, SQLite, ``airflow db migrate``, and
DAG runs with ``dag.test()`` (the same recipe as ``tests/airflow/airflow_env.py``).

`prepare(home)` must run before anything imports Airflow (Airflow reads its home at import).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

BUNDLE_NAME = "dags-folder"


def prepare(home: Path, connections: dict[str, str]) -> None:
    """Point Airflow at ``home`` (SQLite) and set ``AIRFLOW_CONN_<ID>`` variables."""
    if "airflow" in sys.modules and os.environ.get("AIRFLOW_HOME") != str(home):
        raise RuntimeError("Airflow was imported before the demo's AIRFLOW_HOME was set")
    home.mkdir(parents=True, exist_ok=True)
    (home / "dags").mkdir(exist_ok=True)
    os.environ.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
            "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
        }
    )
    for conn_id, value in connections.items():
        os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = value


def migrate() -> None:
    """``airflow db migrate`` on the temporary database (a subprocess, as the CLI does it)."""
    airflow_cli = Path(sys.executable).with_name("airflow")
    done = subprocess.run(
        [str(airflow_cli), "db", "migrate"], capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0:
        raise RuntimeError(f"airflow db migrate failed:\n{done.stderr[-3000:]}")


def run_dag(dag: Any, **kwargs: Any) -> Any:
    """Register ``dag`` as the DAG processor would, then run it once with ``dag.test()``."""
    from airflow_samza_expand.airflow._compat import register_dag

    register_dag(dag, BUNDLE_NAME)
    return dag.test(**kwargs)


def task_states(dag_run: Any) -> dict[str, str]:
    from airflow.utils.session import create_session

    with create_session() as session:
        return {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances(session=session)}


def xcom(dag_run: Any, task_id: str, key: str = "return_value") -> Any:
    from airflow_samza_expand.airflow._compat import task_xcom

    return task_xcom(dag_run.dag_id, dag_run.run_id, task_id, None, key)
