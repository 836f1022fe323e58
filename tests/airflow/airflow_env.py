"""A throwaway Airflow installation for tests: temporary AIRFLOW_HOME, SQLite, migrated once.

Importing this module points Airflow at a fresh temporary home *before* Airflow itself is
imported (Airflow reads ``AIRFLOW_HOME`` once, at import). Reusable from any test package:

    from airflow_env import migrate_airflow_db, run_dag_test   # tests/airflow on sys.path

``run_dag_test(dag)`` serializes the DAG into the metadata database (what the DAG processor
does in production) and then runs it with ``dag.test()``; ``task_states``/``task_instance_xcom``
read the outcome. ``task_context()`` is the minimal context for calling ``execute`` directly;
``first_event(trigger, timeout_s)`` runs a trigger until its first event.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_samza_expand._testing.session_sweep import HOME_PREFIX, remove_stale_homes

remove_stale_homes()  # left by killed runs (their creating pid is gone)
# The pid in the name lets a later run remove it if this process is killed before its atexit.
AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix=f"{HOME_PREFIX}{os.getpid()}-"))
_CREATOR = os.getpid()


@atexit.register
def _remove_home() -> None:
    """At exit of the process that made it (not of a forked task process): tests passed,
    failed or only collected."""
    if os.getpid() == _CREATOR:
        shutil.rmtree(AIRFLOW_HOME, ignore_errors=True)


BUNDLE_NAME = "dags-folder"

_ENV = {
    "AIRFLOW_HOME": str(AIRFLOW_HOME),
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{AIRFLOW_HOME / 'airflow.db'}",
    "AIRFLOW__CORE__DAGS_FOLDER": str(AIRFLOW_HOME / "dags"),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
    "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
}

if "airflow" in sys.modules and os.environ.get("AIRFLOW_HOME") != str(AIRFLOW_HOME):
    _loaded_home = os.environ.get("AIRFLOW_HOME", "~/airflow")
    raise RuntimeError(
        f"Airflow was imported before the test AIRFLOW_HOME was set (it uses {_loaded_home}). "
        "Import airflow_env (tests/airflow/airflow_env.py) before anything imports airflow."
    )
os.environ.update(_ENV)
(AIRFLOW_HOME / "dags").mkdir(exist_ok=True)

_migrated = False


def migrate_airflow_db() -> Path:
    """Run ``airflow db migrate`` once per process on the temporary SQLite database."""
    global _migrated
    if not _migrated:
        airflow_cli = Path(sys.executable).with_name("airflow")
        subprocess.run(
            [str(airflow_cli), "db", "migrate"],
            env={**os.environ, **_ENV},
            check=True,
            capture_output=True,
            timeout=300,
        )
        _migrated = True
    return AIRFLOW_HOME


def kafka_connection_env(bootstrap: str, **extra: Any) -> str:
    """The value of an ``AIRFLOW_CONN_<ID>`` variable for a Kafka connection to ``bootstrap``."""
    return json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": bootstrap, **extra}})


def serialize_dag_to_db(dag: Any) -> None:
    """Write ``dag`` to the metadata database as the DAG processor would (DagModel, DagVersion,
    SerializedDagModel), under the ``dags-folder`` bundle that ``dag.test()`` re-syncs.

    ``dag.test()`` in Airflow 3.3 only creates a run for a DAG that has a ``DagVersion``; a DAG
    defined inside a test module is not in any bundle, so it has to be written explicitly.
    """
    from airflow_samza_expand.airflow._compat import register_dag

    migrate_airflow_db()
    register_dag(dag, BUNDLE_NAME)


def run_dag_test(dag: Any, **kwargs: Any) -> Any:
    """Serialize ``dag`` into the metadata database, then run it once with ``dag.test()``.

    Returns the DagRun; task states via ``dag_run.get_task_instances()`` and XComs via
    ``task_instance_xcom``.
    """
    serialize_dag_to_db(dag)
    return dag.test(**kwargs)


def task_states(dag_run: Any) -> dict[str, str]:
    """task_id -> final state of every task instance of ``dag_run``."""
    from airflow.utils.session import create_session

    with create_session() as session:
        return {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances(session=session)}


_ERROR_LINE = re.compile(r"\[error\s*\]|^\w[\w.]*(Error|Exception|Exit)\b.*: ")


def assert_run_succeeded(dag_run: Any, capfd: Any = None, limit: int = 8) -> None:
    """Fail unless ``dag_run`` succeeded, saying which task failed and why in one screen: the
    task states and (with pytest's ``capfd``) the run's last error lines, as the tasks of
    ``dag.test()`` log to stdout. The captured output is written back, for later reads."""
    if str(dag_run.state) == "success":
        return
    lines = [f"run {dag_run.run_id} {dag_run.state}; tasks {task_states(dag_run)}"]
    if capfd is not None:
        out, err = capfd.readouterr()
        sys.stdout.write(out)
        sys.stderr.write(err)
        errors = [x for x in (out + err).splitlines() if _ERROR_LINE.search(x)]
        lines += ["  " + x[:300] for x in errors[-limit:]]
    pytest.fail("\n".join(lines), pytrace=False)


def task_instance_xcom(dag_run: Any, task_id: str, key: str = "return_value") -> Any:
    """The XCom ``key`` pushed by ``task_id`` in ``dag_run`` (deserialized), or None."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = (
            session.query(XComModel)
            .filter_by(dag_id=dag_run.dag_id, run_id=dag_run.run_id, task_id=task_id, key=key)
            .one_or_none()
        )
        if row is None:
            return None
        return XComModel.deserialize_value(row)


def task_context(task_id: str = "task", dag_id: str = "expansion_test") -> dict[str, Any]:
    """The minimal context ``execute`` needs: a task instance naming DAG and task."""
    return {
        "ti": SimpleNamespace(dag_id=dag_id, task_id=task_id, run_id="manual__test", try_number=1)
    }


async def first_event(trigger, timeout_s: float) -> Any:
    """The first event of ``trigger.run()``; closes the generator (runs its cleanup)."""
    agen = trigger.run()
    try:
        return await asyncio.wait_for(agen.__anext__(), timeout_s)
    finally:
        await agen.aclose()
