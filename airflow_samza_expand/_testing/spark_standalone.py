"""A Spark standalone cluster for tests and the demo: one master and one worker started from the
installed pyspark (``spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker``)
on 127.0.0.1 with free ports, ready when the master's JSON endpoint lists the worker ALIVE,
stopped by pid (test/dev tool only).

    from airflow_samza_expand._testing.spark_standalone import SparkStandalone
    with SparkStandalone() as cluster:
        subprocess.run(["spark-submit", "--master", cluster.master_url, "job.py"])

Each application gets one core unless it sets ``spark.cores.max`` (the master's
``spark.deploy.defaultCores=1``), so a standby job and the active one fit side by side.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

from .launch import ContextManaged, exit_with_parent_hook, free_port, stop_pid, wait_until

log = logging.getLogger(__name__)

DESCRIPTION = (
    "Run a Spark standalone master and one worker from the installed pyspark on 127.0.0.1, in "
    "the foreground until Ctrl-C. Submit with --master spark://127.0.0.1:<port>."
)


def spark_class_binary() -> str:
    """spark-class beside this interpreter (a pip pyspark)."""
    sibling = os.path.join(os.path.dirname(sys.executable), "spark-class")
    if os.access(sibling, os.X_OK):
        return sibling
    raise RuntimeError(
        f"spark-class not found beside {sys.executable} - install pyspark into this "
        "environment (bash scripts/setup.sh)"
    )


class SparkStandalone(ContextManaged):
    """Master + one worker JVM; `.master_url` is "spark://127.0.0.1:<port>" once started."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        worker_cores: int = 4,
        worker_memory: str = "4g",
        daemon_memory: str = "512m",
        work_dir: str | os.PathLike | None = None,
        start_timeout_s: float = 120.0,
        exit_with_parent: bool = True,
    ) -> None:
        self.host = host
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.daemon_memory = daemon_memory
        self.start_timeout_s = start_timeout_s
        self.exit_with_parent = exit_with_parent
        self._tmp = tempfile.TemporaryDirectory(prefix="samza-spark-standalone-")
        self.work = Path(work_dir) if work_dir else Path(self._tmp.name)
        self.port: int | None = None
        self.web_port: int | None = None
        self.master: subprocess.Popen | None = None
        self.worker: subprocess.Popen | None = None

    @property
    def master_url(self) -> str:
        if self.port is None:
            raise RuntimeError("cluster not started - call start() or use it as a context manager")
        return f"spark://{self.host}:{self.port}"

    @property
    def master_web_url(self) -> str:
        return f"http://{self.host}:{self.web_port}"

    @property
    def master_pid(self) -> int | None:
        return self.master.pid if self.master else None

    @property
    def worker_pid(self) -> int | None:
        return self.worker.pid if self.worker else None

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            SPARK_LOCAL_IP=self.host,
            SPARK_DAEMON_MEMORY=self.daemon_memory,
            SPARK_MASTER_OPTS="-Dspark.deploy.defaultCores=1",
            SPARK_WORKER_DIR=str(self.work / "worker"),
            PYSPARK_PYTHON=env.get("PYSPARK_PYTHON", sys.executable),
        )
        return env

    def _spawn(self, name: str, *args: str) -> subprocess.Popen:
        with open(self.work / f"{name}.log", "ab") as out:
            return subprocess.Popen(
                [spark_class_binary(), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self._env(),
                cwd=self.work,
                preexec_fn=exit_with_parent_hook(self.exit_with_parent),  # noqa: PLW1509
            )

    def start(self) -> SparkStandalone:
        self.work.mkdir(parents=True, exist_ok=True)
        self.port, self.web_port = free_port(self.host), free_port(self.host)
        self.master = self._spawn(
            "master", "org.apache.spark.deploy.master.Master",
            "--host", self.host, "--port", str(self.port), "--webui-port", str(self.web_port),
        )  # fmt: skip
        log.info("waiting for the Spark master (pid %d) at %s", self.master.pid, self.master_url)
        try:
            wait_until("the Spark master to serve its JSON status", self._status,
                       timeout_s=self.start_timeout_s, alive=self._exited)  # fmt: skip
            self.worker = self._spawn(
                "worker", "org.apache.spark.deploy.worker.Worker",
                "--host", self.host, "--port", str(free_port(self.host)),
                "--webui-port", str(free_port(self.host)), "--cores", str(self.worker_cores),
                "--memory", self.worker_memory, "--work-dir", str(self.work / "worker"),
                self.master_url,
            )  # fmt: skip
            log.info("waiting for the Spark worker (pid %d) to register", self.worker.pid)
            wait_until("the Spark worker to register ALIVE with the master",
                       lambda: (self._status() or {}).get("aliveworkers", 0) >= 1,
                       timeout_s=self.start_timeout_s, alive=self._exited)  # fmt: skip
        except Exception as exc:
            self.stop()
            raise RuntimeError(f"{exc}; logs in {self.work}:\n{self.log_tail()}") from exc
        log.info("Spark standalone at %s (web UI %s)", self.master_url, self.master_web_url)
        return self

    def _status(self) -> dict[str, Any] | None:
        """The master's /json/ status, None while it does not answer."""
        try:
            with urllib.request.urlopen(f"{self.master_web_url}/json/", timeout=2) as resp:
                status = json.loads(resp.read())
        except (OSError, ValueError):
            return None
        return status if status.get("status") == "ALIVE" else None

    def _exited(self) -> str | None:
        for name, proc in (("master", self.master), ("worker", self.worker)):
            if proc is not None and proc.poll() is not None:
                return f"the Spark {name} exited with {proc.returncode}"
        return None

    def status(self) -> dict[str, Any]:
        """The master's /json/ status (workers, activeapps, completedapps, ...)."""
        status = self._status()
        if status is None:
            raise RuntimeError(f"the Spark master at {self.master_web_url} does not answer")
        return status

    def log_tail(self, chars: int = 3000) -> str:
        parts = []
        for name in ("master", "worker"):
            path = self.work / f"{name}.log"
            if path.exists():
                parts.append(f"--- {name}.log\n{path.read_text(errors='replace')[-chars:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        stop_pid(self.worker, "the Spark worker")
        stop_pid(self.master, "the Spark master")
        self.worker = self.master = None

    def close(self) -> None:
        self.stop()
        self._tmp.cleanup()


def run_spark(args: argparse.Namespace) -> int:
    from .cli_engines import _serve

    cluster = SparkStandalone(worker_cores=args.worker_cores, worker_memory=args.worker_memory)
    return _serve(
        "the Spark standalone cluster",
        cluster.start,
        cluster.close,
        lambda: [
            f"Spark standalone master {cluster.master_url} (pid {cluster.master_pid}), "
            f"web UI {cluster.master_web_url}; worker pid {cluster.worker_pid}; "
            f"logs in {cluster.work}; Ctrl-C stops them"
        ],
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    spark = subparsers.add_parser(
        "spark-standalone", help="run a Spark standalone master + worker on 127.0.0.1",
        description=DESCRIPTION,
    )  # fmt: skip
    spark.add_argument("--worker-cores", type=int, default=4,
                       help="cores the worker offers (scheduling slots; default 4)")  # fmt: skip
    spark.add_argument("--worker-memory", default="4g", help="worker memory (default 4g)")
    spark.set_defaults(func=run_spark)
