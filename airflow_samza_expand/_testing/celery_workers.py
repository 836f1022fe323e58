"""Celery workers for the system tests of `_testing.airflow_services`: the CeleryExecutor with a
broker and result backend that need no server (kombu's SQLAlchemy transport, Celery's database
backend: SQLite files), and workers that share nothing but the metadata database (through the
api-server) and the broker - each its own temp directory, HOME, host name for launches
(``SAMZA_EXPAND_HOST``) and log-server port, as two machines would.

    submit = spawn_noting_submit(root, 'exec spark-submit-for-real "$@"')
    with AirflowServices.start(home, env={**celery_env(home), "PATH": f"{submit}:..."}) as af:
        workers = CeleryWorkers(af, root)
        workers.up()  # worker-a and worker-b, each a machine of its own under root
        ...
        other = workers.kill_on_retry(dag_id, run_id, "submit", first)

Used by benchmarks/celery_workers.py (the real jobs).
"""

from __future__ import annotations

import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
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


WORKERS = ("worker-a", "worker-b")
# spark-submit as the workers run it: notes the spawn (its pid and arguments) in
# ``spawns-<job>.txt``, then goes on as ``then`` says
SPAWN_NOTING_SUBMIT = """#!/bin/sh
job=""; prev=""
for a in "$@"; do [ "$prev" = "--job-name" ] && job="$a"; prev="$a"; done
echo "$$ $*" >> {root}/spawns-$job.txt
{then}
"""


def spawn_noting_submit(root: Path, then: str) -> Path:
    """Write ``root/bin/spark-submit`` (`SPAWN_NOTING_SUBMIT`; ``then`` is shell, the
    arguments in ``"$@"``); the directory to put first on the workers' PATH."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "spark-submit"
    script.write_text(SPAWN_NOTING_SUBMIT.format(root=root, then=then))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return bin_dir


def spawns(root: Path, job_name: str) -> list[str]:
    """The spark-submit spawns of job ``job_name`` on any worker: ``"<pid> <arguments>"``."""
    path = root / f"spawns-{job_name}.txt"
    return path.read_text().splitlines() if path.exists() else []


@dataclass
class CeleryWorkers:
    """The Celery workers ``names`` of services ``af``, each a machine under ``root / name``."""

    af: AirflowServices
    root: Path
    names: tuple[str, ...] = WORKERS

    def up(self, names: Iterable[str] | None = None) -> list[str]:
        """Start those of ``names`` (default: all) not running; the names."""
        names = list(self.names if names is None else names)
        for name in names:
            if name not in self.af.services:
                start_worker(self.af, name, self.root / name)
        return names

    def only_one(self) -> str:
        """Keep one worker running (stop the others): every task runs there; its name."""
        alive = [w for w in self.names if w in self.af.services]
        for name in alive[1:]:
            self.af.kill(name)
        return alive[0] if alive else self.up(self.names[:1])[0]

    def other(self, worker: str) -> str:
        return next(w for w in self.names if w != worker)

    def said(self, dag_id: str, task_id: str, text: str, attempt: int = 2) -> str | None:
        """The line of the task's try ``attempt``'s log that says ``text``, once it does."""
        pattern = f"dag_id={dag_id}/*/task_id={task_id}/attempt={attempt}.log"
        for path in (self.af.home / "logs").glob(pattern):
            for line in path.read_text(errors="replace").splitlines():
                if text in line:
                    return line
        return None

    def kill_on_retry(self, dag_id: str, run_id: str, task_id: str, worker: str) -> str:
        """SIGKILL ``worker`` with its task, mid-step; the other worker (started if down),
        once the task's retry runs there. A launching step is killed once its launch is
        detached (the launcher exited: the launch is no process of the worker's any more, as
        a cluster manager's job is not): before that, the kill takes the launch with it and
        the retry rightly launches again after its window."""
        if task_id in ("submit", "submit_standby"):
            self.af.wait(lambda: self.said(dag_id, task_id, "detached: pid", attempt=1),
                         "the launch to be detached from the worker", 300)  # fmt: skip
        other = self.other(worker)
        self.up([other])
        self.af.kill(worker)
        self.af.wait_ti(dag_id, run_id, task_id, "running", until=lambda ti: ti["try_number"] == 2,
                        timeout_s=180)  # fmt: skip
        return other

    def ended(self, dag_id: str, run_id: str, look: Callable[[], object] = lambda: None,
              timeout_s: float = 900) -> tuple[str, dict]:  # fmt: skip
        """The run's end state and task instances, calling ``look()`` meanwhile."""

        def state() -> str | None:
            look()
            status, run = self.af.api("GET", f"dags/{dag_id}/dagRuns/{run_id}")
            found = run.get("state") if status == 200 else None
            return found if found in ("success", "failed") else None

        return self.af.wait(state, "the run to end", timeout_s), self.af.task_instances(
            dag_id, run_id
        )


__all__ = ["CeleryWorkers", "celery_env", "spawn_noting_submit", "spawns", "start_worker"]
