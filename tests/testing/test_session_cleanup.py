"""A test run leaves nothing behind: its temporary Airflow home is removed at exit (tests
failed or only collected), and the processes it started - detached launches included, as the
DAG's Spark jobs are - die with it, even when pytest is killed with SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_samza_expand._testing.session_sweep import HOME_PREFIX

REPO = Path(__file__).resolve().parents[2]
PROBE = "tests/testing/leak_probe.py"

pytestmark = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")


def _pytest(tmp_path: Path, mode: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "TMPDIR": str(tmp_path), "LEAK_PROBE_DIR": str(tmp_path)}
    env["LEAK_PROBE_MODE"] = mode
    cmd = [sys.executable, "-m", "pytest", PROBE, "-p", "no:cacheprovider", "-q", *args]
    return subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _probe(tmp_path: Path, proc: subprocess.Popen[str], timeout_s: float = 60) -> dict:
    path = tmp_path / "probe.json"
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        assert time.monotonic() < deadline, "the probe did not start"
        time.sleep(0.1)
    return json.loads(path.read_text())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _wait_gone(pids: list[int], timeout_s: float = 20) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.2)
    return [p for p in pids if _alive(p)]


def _kill_left(pids: list[int]) -> None:
    for pid in pids:  # only the probe's own pids, if the test failed
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _homes(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.glob(f"{HOME_PREFIX}*"))


def test_a_failing_run_leaves_no_process_and_no_airflow_home(tmp_path):
    proc = _pytest(tmp_path, "fail")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "the probe fails on purpose" in out, out
    probe = json.loads((tmp_path / "probe.json").read_text())
    try:
        assert _wait_gone(probe["pids"]) == []
    finally:
        _kill_left(probe["pids"])
    assert _homes(tmp_path) == []


def test_a_collect_only_run_leaves_no_airflow_home(tmp_path):
    proc = _pytest(tmp_path, "fail", "--collect-only", "tests/airflow/test_airflow_dag.py")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    assert _homes(tmp_path) == []


def test_a_killed_run_leaves_no_process_and_its_home_goes_next_run(tmp_path):
    proc = _pytest(tmp_path, "hang")
    probe = _probe(tmp_path, proc)
    os.kill(proc.pid, signal.SIGKILL)  # no atexit, no session finish: only the watchdog
    proc.communicate(timeout=30)
    try:
        assert _wait_gone(probe["pids"]) == []
    finally:
        _kill_left(probe["pids"])
    assert _homes(tmp_path) == [Path(probe["home"]).name]  # SIGKILL skipped atexit
    (tmp_path / "probe.json").unlink()
    again = _pytest(tmp_path, "fail", "--collect-only")
    out, _ = again.communicate(timeout=120)
    assert again.returncode == 0, out
    assert _homes(tmp_path) == []  # the next run removed the dead run's home
