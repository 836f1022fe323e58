"""Celery workers for the system tests of `_testing.airflow_services`: the CeleryExecutor with a
broker and result backend that need no server (kombu's SQLAlchemy transport, Celery's database
backend: SQLite files), and workers that share nothing but the metadata database (through the
api-server) and the broker - each its own temp directory, HOME, host name for launches
(``SAMZA_EXPAND_HOST``) and log-server port, as two machines would.

    with AirflowServices.start(home, env={**celery_env(home), ...}) as af:
        start_worker(af, "worker-a", root / "a")
"""

from __future__ import annotations

from pathlib import Path

from airflow_samza_expand._testing.airflow_services import AirflowServices, Service
from airflow_samza_expand._testing.launch import free_port


def celery_env(home: Path, *, heartbeat_timeout_s: int = 15) -> dict[str, str]:
    """The services' settings for the CeleryExecutor (one task per worker at a time); a task
    whose worker died is failed, and retried, ``heartbeat_timeout_s`` after its last
    heartbeat."""
    return {
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__CELERY__BROKER_URL": f"sqla+sqlite:///{home / 'celery-broker.db'}",
        "AIRFLOW__CELERY__RESULT_BACKEND": f"db+sqlite:///{home / 'celery-results.db'}",
        "AIRFLOW__CELERY__WORKER_CONCURRENCY": "1",
        "AIRFLOW__CELERY__SYNC_PARALLELISM": "1",
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(heartbeat_timeout_s),
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "2",
    }


def start_worker(af: AirflowServices, name: str, root: Path) -> Service:
    """Start Celery worker ``name`` (service ``name``) with a machine of its own under
    ``root``; returns once its log says it is ready."""
    for sub in ("tmp", "home"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    env = {
        "TMPDIR": str(root / "tmp"),
        "HOME": str(root / "home"),
        "SAMZA_EXPAND_HOST": name,
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
    }
    command = ["celery", "worker", "--concurrency", "1", "--celery-hostname", f"{name}@%h"]
    service = af.start_service(name, command=command, env=env)
    af.wait(
        lambda: " ready." in service.log_path.read_text(errors="replace"),
        f"Celery worker {name} to be ready",
    )
    return service


__all__ = ["celery_env", "start_worker"]
