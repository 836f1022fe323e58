"""Processors of the PySpark job as separate processes (own JVM, own process group).

For the lease tests and `benchmarks/handover.py`: each `JobProcess` runs
``python airflow_samza_expand/spark/job.py --master local[2] ...`` so it can be SIGKILLed,
SIGSTOPped and SIGCONTed as a whole, like a real launch of the job.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path

JOB_PY = str(Path(__file__).resolve().parent.parent / "spark" / "job.py")
USER_JOB_PY = str(Path(__file__).resolve().parent.parent / "examples" / "user_job.py")
_COMMIT_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*committed group ", re.M)


class JobProcess:
    """One launch of the job (``script``: the shipped job, or e.g. the example user job
    `USER_JOB_PY`, with ``env`` added), logging to ``log_path``."""

    def __init__(
        self,
        name: str,
        args: Sequence[str],
        log_path: Path | str,
        script: str = JOB_PY,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.log_path = Path(log_path)
        self.expect_running = True
        env = dict(
            os.environ,
            PYSPARK_PYTHON=sys.executable,
            PYSPARK_DRIVER_PYTHON=sys.executable,
            **(env or {}),
        )
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            [sys.executable, script, *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def tail(self, chars: int = 4000) -> str:
        return self.log_text()[-chars:]

    def commit_times(self) -> list[datetime]:
        """When this process committed group offsets (from its log lines)."""
        return [
            datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f")
            for m in _COMMIT_LINE.finditer(self.log_text())
        ]

    def signal_group(self, sig: int) -> None:
        os.killpg(self.popen.pid, sig)

    def wait(self, timeout_s: float = 300.0) -> int:
        self.expect_running = False
        return self.popen.wait(timeout_s)

    def stop(self) -> None:
        """Kill the whole process group (idempotent)."""
        self.expect_running = False
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGCONT)
                os.killpg(self.popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.popen.wait(30)
        self._log.close()


__all__ = ["JOB_PY", "USER_JOB_PY", "JobProcess"]
