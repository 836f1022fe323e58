"""Start and stop the development broker as a subprocess (test/dev tool only)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .faults import FaultClient
from .launch import LaunchedProcess, stop_pid

log = logging.getLogger(__name__)


class DevBrokerProcess(LaunchedProcess):
    """`python -m airflow_samza_expand._testing` in a subprocess; usable as a context manager.

    `port=0` lets the broker bind a free port (no race); `.bootstrap` is "127.0.0.1:<port>".
    With `exit_with_parent` (default) the broker also stops if this process dies without
    calling stop(), e.g. a test session killed by a timeout.
    Broker output goes to `log_path` (default: a file in a temporary directory).
    """

    def __init__(
        self,
        port: int = 0,
        data_dir: str | os.PathLike | None = None,
        host: str = "127.0.0.1",
        log_level: str = "INFO",
        log_path: str | os.PathLike | None = None,
        start_timeout_s: float = 30.0,
        extra_args: list[str] | None = None,
        exit_with_parent: bool = True,
    ) -> None:
        self.host = host
        self.requested_port = port
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.log_level = log_level
        self.start_timeout_s = start_timeout_s
        self.extra_args = list(extra_args or [])
        self.exit_with_parent = exit_with_parent
        self._tmp = tempfile.TemporaryDirectory(prefix="samza-dev-broker-")
        self.log_path = Path(log_path) if log_path else Path(self._tmp.name) / "broker.log"
        self.port: int | None = None
        self.control_port: int | None = None
        self.proc: subprocess.Popen | None = None
        self._log_file = None

    @property
    def bootstrap(self) -> str:
        if self.port is None:
            raise RuntimeError("broker not started - call start() or use it as a context manager")
        return f"{self.host}:{self.port}"

    @property
    def faults(self) -> FaultClient:
        if self.control_port is None:
            raise RuntimeError("broker not started - call start() first")
        return FaultClient("127.0.0.1", self.control_port)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> DevBrokerProcess:
        ready = Path(self._tmp.name) / f"ready-{time.monotonic_ns()}.json"
        cmd = [
            sys.executable,
            "-m",
            "airflow_samza_expand._testing",
            "--host",
            self.host,
            "--port",
            str(self.requested_port if self.port is None else self.port),
            "--ready-file",
            str(ready),
            "--log-level",
            self.log_level,
            *self.extra_args,
        ]
        if self.data_dir is not None:
            cmd += ["--data-dir", str(self.data_dir)]
        if self.exit_with_parent:
            cmd.append("--exit-with-parent")
        self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, stdout=self._log_file, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.start_timeout_s
        log.info(
            "waiting up to %.0fs for the development broker (pid %d) to listen",
            self.start_timeout_s,
            self.proc.pid,
        )
        while not ready.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"development broker exited with {self.proc.returncode}; "
                    f"log:\n{self.log_text()[-4000:]}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"development broker did not listen within "
                    f"{self.start_timeout_s}s; log:\n{self.log_text()[-4000:]}"
                )
            time.sleep(0.05)
        info = json.loads(ready.read_text())
        self.port = info["port"]
        self.control_port = info["control_port"]
        self.faults._call({"op": "ping"})
        log.info("development broker listening at %s", self.bootstrap)
        return self

    def restart(self) -> DevBrokerProcess:
        """Stop and start again on the same port (state survives only with data_dir)."""
        self.stop()
        return self.start()

    def stop(self, timeout_s: float = 15.0) -> None:
        stop_pid(self.proc, "the development broker", timeout_s)
        self.proc = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def close(self) -> None:
        self.stop()
        self._tmp.cleanup()
