"""Nothing a test run starts outlives it: processes and temporary Airflow homes.

A detached launch (``_protocol.job.launch``: the DAG's restarted Spark job, the demo's jobs) must
survive the Airflow task that started it, so it runs in a session of its own and nothing ties
it to its launcher. In a test run, though, it must die with the run - also when the run is
killed with SIGKILL. So the run marks what it starts, and a watchdog sweeps the marks:

* `mark_session()` (at conftest import) puts ``SAMZA_EXPAND_TEST_SESSION=<id>`` into the
  environment; every process the run starts from then on (pytest's children, spark-submit, its
  JVM and Python workers, Airflow's task processes, detached launches) inherits it.
* `start_watchdog()` starts ``python -m airflow_samza_expand._testing.session_sweep`` in a new
  session: it polls the pytest pid and, once that is gone (however it ended), sweeps.
* `sweep(marker)` SIGTERMs every process whose initial environment carries the marker, then
  SIGKILLs what is left after a grace. It signals pids one by one, never a process group (a
  group may hold the CI runner), and never this process or the watchdog.

Linux only (``/proc``); elsewhere it does nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

MARKER_ENV = "SAMZA_EXPAND_TEST_SESSION"
HOME_PREFIX = "samza-expand-airflow-home-"
WATCH_INTERVAL_S = 0.5


def mark_session() -> str:
    """Give this test run its own marker (a nested run gets a new one); return it."""
    marker = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
    os.environ[MARKER_ENV] = marker
    return marker


def marked_pids(marker: str) -> list[int]:
    """Pids (not this process) whose initial environment holds ``MARKER_ENV=marker``."""
    needle = f"{MARKER_ENV}={marker}".encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        pid = int(entry.name)
        if pid == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if needle in environ.split(b"\0"):
            found.append(pid)
    return sorted(found)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(errors="replace")
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def sweep(marker: str, *, grace_s: float = 5.0, spare: frozenset[int] = frozenset()) -> list[int]:
    """SIGTERM the marked processes (except `spare`), SIGKILL them after `grace_s`; return the
    pids signalled."""
    pids = [p for p in marked_pids(marker) if p not in spare]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    # children started while we waited carry the marker too
    for pid in {*pids, *(p for p in marked_pids(marker) if p not in spare)}:
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    return pids


def start_watchdog(marker: str) -> subprocess.Popen[bytes] | None:
    """Start the watchdog of this process (new session: a kill of our group spares it)."""
    if not Path("/proc/self/environ").exists():
        return None
    return subprocess.Popen(
        [sys.executable, "-m", __name__, "--watch", str(os.getpid()), "--marker", marker],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def remove_stale_homes(directory: str | None = None) -> list[str]:
    """Remove ``samza-expand-airflow-home-<pid>-*`` dirs whose creating process is gone (a
    killed run); homes of live processes, and older names without a pid, are kept."""
    removed = []
    for path in Path(directory or tempfile.gettempdir()).glob(f"{HOME_PREFIX}*"):
        match = re.match(rf"{HOME_PREFIX}(\d+)-", path.name)
        if match and path.is_dir() and not _alive(int(match.group(1))):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path))
    return removed


def _watch(pid: int, marker: str) -> int:
    while _alive(pid):
        time.sleep(WATCH_INTERVAL_S)
    sweep(marker, spare=frozenset({os.getpid()}))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {__name__}")
    parser.add_argument("--watch", type=int, required=True, help="pid of the test run")
    parser.add_argument("--marker", required=True, help=f"the run's {MARKER_ENV} value")
    args = parser.parse_args(argv)
    return _watch(args.watch, args.marker)


if __name__ == "__main__":
    sys.exit(main())
