"""Real Airflow services for system tests: ``airflow api-server``, ``scheduler`` (LocalExecutor),
``dag-processor`` and ``triggerer`` for a temporary AIRFLOW_HOME (SQLite, its own dags folder),
as ``airflow standalone`` starts them, but each a process of its own that a test can kill.

    with AirflowServices.start(home, env={"AIRFLOW_CONN_KAFKA_DEFAULT": ...}) as af:
        af.wait_dag(dag_id)
        run_id = af.trigger(dag_id)
        ti = af.wait_ti(dag_id, run_id, "barrier", "deferred")
        af.kill("triggerer")          # SIGKILL of the triggerer and everything it started
        af.start_service("triggerer")  # a new one (a new triggerer job id)

Each service runs in a session of its own, logs to ``<home>/services/<name>-<n>.log`` (kept:
`logs()` puts their tails in failure messages) and is stopped by its pids (its process tree:
SIGTERM, then SIGKILL) - also when the test fails. The test process talks to the services
through the REST API only (it never imports Airflow, whose home is fixed at import): one wait
(`wait`) over it serves "DAG parsed", "task instance in state X" and "run ended".

With the CeleryExecutor, `_testing.celery_workers` starts workers through `start_service`.

Short heartbeats: the triggerer beats every second and a triggerer silent for
``triggerer_health_check_threshold`` (3 s) is dead - its triggers go to a live triggerer.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import psutil

from airflow_samza_expand._testing.launch import free_port
from airflow_samza_expand.core._clock import parse_iso

SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer")
T = TypeVar("T")


class ServiceError(AssertionError):
    """A service died or a wait timed out; the message carries the services' log tails."""


def service_env(home: Path, port: int, extra: Mapping[str, str] = ()) -> dict[str, str]:
    """The environment of every service: this process's, without its ``AIRFLOW__`` settings,
    pointed at ``home`` (SQLite), LocalExecutor with parallelism 4, no auth (all admins),
    short triggerer heartbeats, a quick look for new DAG files, log servers on free ports;
    then ``extra``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__")}
    url = f"http://127.0.0.1:{port}"
    return {
        **base,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{url}/execution/",
        "AIRFLOW__API__BASE_URL": url,
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),  # shared by all services
        "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1",
        "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "3",
        "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.5",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "2",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        # their log servers on free ports (defaults 8793/8794: two sets of services would clash)
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        **dict(extra),
    }


@dataclass
class Service:
    name: str
    proc: subprocess.Popen
    log_path: Path
    started_at: datetime


@dataclass
class AirflowServices:
    home: Path
    env: dict[str, str]
    port: int
    services: dict[str, Service] = field(default_factory=dict)
    stopped: list[Service] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def dags_folder(self) -> Path:
        return self.home / "dags"

    @classmethod
    def start(
        cls,
        home: Path,
        *,
        env: Mapping[str, str] = (),
        names: Iterable[str] = SERVICES,
        timeout_s: float = 240.0,
    ) -> AirflowServices:
        """Migrate a fresh SQLite database in ``home``, start ``names`` and wait until the
        api-server answers and the scheduler, dag-processor and triggerer have heartbeated."""
        home.mkdir(parents=True, exist_ok=True)
        (home / "dags").mkdir(exist_ok=True)
        (home / "services").mkdir(exist_ok=True)
        port = free_port()
        af = cls(home=home, env=service_env(home, port, env), port=port)
        migrate = subprocess.run(
            [_airflow(), "db", "migrate"], env=af.env, capture_output=True, text=True,
            timeout=300, check=False,
        )  # fmt: skip
        if migrate.returncode != 0:
            raise ServiceError(f"airflow db migrate failed: {migrate.stderr[-3000:]}")
        try:
            for name in names:
                af.start_service(name)
            af.wait(af._health, "the api-server to answer", timeout_s)
            for name in names:
                if name != "api-server":
                    af.wait_healthy(name, timeout_s)
        except BaseException:
            af.stop()
            raise
        return af

    def __enter__(self) -> AirflowServices:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start_service(
        self,
        name: str,
        *,
        command: Iterable[str] | None = None,
        env: Mapping[str, str] = (),
    ) -> Service:
        """Start ``airflow <name>`` (or ``airflow <command>``, with ``env`` added) - a new
        process; a name already running is refused."""
        if name in self.services and self.services[name].proc.poll() is None:
            raise ValueError(f"{name} is already running (pid {self.services[name].proc.pid})")
        n = sum(1 for s in self.stopped if s.name == name) + 1
        log_path = self.home / "services" / f"{name}-{n}.log"
        started_at = datetime.now(UTC).replace(microsecond=0)
        argv = [_airflow(), *(command or [name])]
        if name == "api-server":
            argv += ["--host", "127.0.0.1", "--port", str(self.port)]
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                argv, env={**self.env, **dict(env)}, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.home, start_new_session=True,
            )  # fmt: skip
        self.services[name] = Service(name, proc, log_path, started_at)
        return self.services[name]

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to service ``name`` and every process it started (as a container kill
        would), and wait for it; SIGKILL: nothing of it runs any more."""
        service = self.services.pop(name)
        _signal_tree(service.proc.pid, sig)
        try:
            service.proc.wait(30)
        except subprocess.TimeoutExpired:
            _signal_tree(service.proc.pid, signal.SIGKILL)
            service.proc.wait(30)
        self.stopped.append(service)

    def stop(self) -> None:
        """Stop every service at once: SIGTERM to each process tree, SIGKILL to what still
        runs 30 s later."""
        services, self.services = list(self.services.values()), {}
        for service in services:
            _signal_tree(service.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for service in services:
            try:
                service.proc.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                _signal_tree(service.proc.pid, signal.SIGKILL)
                service.proc.wait(30)
            self.stopped.append(service)

    def log_text(self, name: str) -> str:
        """The log of the running service ``name`` so far."""
        return self.services[name].log_path.read_text(errors="replace")

    def logs(self, tail: int = 2000) -> str:
        """The last ``tail`` characters of every service's log (running and stopped)."""
        parts = []
        for service in [*self.stopped, *self.services.values()]:
            text = service.log_path.read_text(errors="replace") if service.log_path.exists() else ""
            parts.append(
                f"--- {service.log_path.name} (pid {service.proc.pid}) ---\n{text[-tail:]}"
            )
        return "\n".join(parts)

    # -- the REST API ------------------------------------------------------------------------

    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """``method`` ``/api/v2/<path>``: (status, decoded JSON or text)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.base_url}/api/v2/{path.lstrip('/')}", data=data, method=method,
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        try:
            return status, json.loads(raw or b"null")
        except ValueError:
            return status, raw.decode(errors="replace")

    def wait(self, probe: Callable[[], T | None], what: str, timeout_s: float = 120.0) -> T:
        """The one wait: call ``probe`` until it returns something other than None (or False);
        fail naming ``what`` and the services' log tails on time-out or if a service died."""
        deadline = time.monotonic() + timeout_s
        while True:
            dead = [s for s in self.services.values() if s.proc.poll() is not None]
            if dead:
                names = ", ".join(f"{s.name} (exit {s.proc.returncode})" for s in dead)
                raise ServiceError(f"{names} died while waiting for {what}\n{self.logs()}")
            try:
                value = probe()
            except OSError:  # the api-server is (re)starting
                value = None
            if value is not None and value is not False:
                return value
            if time.monotonic() > deadline:
                raise ServiceError(f"timed out after {timeout_s:.0f} s waiting for {what}\n"
                                   f"{self.logs()}")  # fmt: skip
            time.sleep(0.2)

    def _health(self) -> dict | None:
        status, body = self.api("GET", "monitor/health")
        return body if status == 200 else None

    def wait_healthy(self, name: str, timeout_s: float = 120.0) -> dict:
        """The newest job of service ``name`` (scheduler, dag-processor, triggerer) running and
        heartbeating, and started by the current process of that service."""
        job_type = {"scheduler": "SchedulerJob", "dag-processor": "DagProcessorJob",
                    "triggerer": "TriggererJob"}[name]  # fmt: skip
        started = self.services[name].started_at  # the Jobs API has no pid: a job started
        # after this process was is its own (a restarted service's, not the dead one's)

        def probe() -> dict | None:
            mine = [
                j for j in self.jobs(job_type)
                if j["state"] == "running" and j["end_date"] is None and j["latest_heartbeat"]
                and datetime.fromisoformat(j["start_date"]) >= started
            ]  # fmt: skip
            return mine[-1] if mine else None

        return self.wait(probe, f"the {name} job to heartbeat", timeout_s)

    def jobs(self, job_type: str) -> list[dict]:
        """Jobs of ``job_type`` (oldest first), e.g. every ``TriggererJob``."""
        status, body = self.api("GET", f"jobs?job_type={job_type}&order_by=id&limit=100")
        return body["jobs"] if status == 200 else []

    def wait_dag(self, dag_id: str, timeout_s: float = 120.0) -> dict:
        """Until the dag-processor has parsed ``dag_id`` (it is in the API, active)."""

        def probe() -> dict | None:
            status, body = self.api("GET", f"dags/{dag_id}")
            return body if status == 200 and not body.get("is_stale") else None

        return self.wait(probe, f"DAG {dag_id} to be parsed", timeout_s)

    def trigger(self, dag_id: str, conf: Mapping[str, Any] | None = None) -> str:
        """Trigger a run of ``dag_id`` now; its run id."""
        body = {"logical_date": None, "conf": dict(conf or {})}
        status, run = self.api("POST", f"dags/{dag_id}/dagRuns", body)
        if status not in (200, 201):
            raise ServiceError(f"triggering {dag_id} failed: {status} {run}")
        return str(run["dag_run_id"])

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> dict | None:
        status, body = self.api("GET", f"dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}")
        return body if status == 200 else None

    def task_instances(self, dag_id: str, run_id: str) -> dict[str, dict]:
        """task_id -> task instance (state, try_number, trigger, triggerer_job, ...)."""
        status, body = self.api("GET", f"dags/{dag_id}/dagRuns/{run_id}/taskInstances?limit=100")
        if status != 200:
            raise ServiceError(f"task instances of {dag_id}/{run_id}: {status} {body}")
        return {ti["task_id"]: ti for ti in body["task_instances"]}

    def wait_ti(
        self,
        dag_id: str,
        run_id: str,
        task_id: str,
        state: str,
        *,
        until: Callable[[dict], bool] = lambda ti: True,
        timeout_s: float = 120.0,
    ) -> dict:
        """Until task ``task_id`` of the run is in ``state`` (and ``until(ti)``); the TI."""

        def probe() -> dict | None:
            ti = self.task_instance(dag_id, run_id, task_id)
            return ti if ti and ti.get("state") == state and until(ti) else None

        return self.wait(probe, f"{dag_id}/{run_id}/{task_id} to be {state}", timeout_s)

    def wait_trigger_polls(
        self,
        dag_id: str,
        run_id: str,
        task_id: str,
        triggerer: dict,
        store: Any,
        *,
        timeout_s: float = 120.0,
    ) -> dict:
        """Until ``task_id`` is deferred on a trigger of ``triggerer`` (a job of the API) and
        that trigger polls: it renewed the expansion lease in ``store`` (the job's coordinator
        store) after the assignment was seen. The task instance."""
        ti = self.wait_ti(
            dag_id, run_id, task_id, "deferred", timeout_s=timeout_s,
            until=lambda ti: (ti.get("trigger") or {}).get("triggerer_id") == triggerer["id"],
        )  # fmt: skip
        seen = time.time()

        def renewed() -> Any:
            store.refresh()
            lease = store.get_lease("expansion")
            return lease if lease and parse_iso(lease.renewed_at).timestamp() > seen else None

        self.wait(renewed, f"{task_id}'s trigger to poll in triggerer {triggerer['id']}")
        return ti

    def wait_run(self, dag_id: str, run_id: str, timeout_s: float = 180.0) -> str:
        """Until the run ends (success or failed); its state."""

        def probe() -> str | None:
            status, run = self.api("GET", f"dags/{dag_id}/dagRuns/{run_id}")
            state = run.get("state") if status == 200 else None
            return state if state in ("success", "failed") else None

        return self.wait(probe, f"run {dag_id}/{run_id} to end", timeout_s)


def _signal_tree(pid: int, sig: int) -> None:
    """``sig`` to ``pid`` and all its descendants (collected first), one pid at a time."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(sig)


def _airflow() -> str:
    return str(Path(sys.executable).with_name("airflow"))


__all__ = ["SERVICES", "AirflowServices", "ServiceError", "service_env"]
