"""The detached launcher (protocol.launch) with real processes: it returns while the command
runs, terminates it by its handle and records its exit code."""

from __future__ import annotations

import sys
import time

from airflow_samza_expand._protocol import launch as detached


def _wait(cond, timeout_s=20.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_detached_launch_returns_at_once_and_terminates_by_handle(tmp_path) -> None:
    # The command runs until the test creates `release` (300 s at most): a launch that waited
    # for the command would return only after it exited, and the checks below would fail.
    release = tmp_path / "release"
    waits = (
        "import os, time; print('up', flush=True)\n"
        f"for _ in range(3000):\n    if os.path.exists({str(release)!r}): break\n"
        "    time.sleep(0.1)\n"
    )
    handle = detached.launch([sys.executable, "-c", waits], log_path=str(tmp_path / "job.log"))
    assert not release.exists()
    assert detached.exit_code(handle) is None  # returned while the command still runs
    assert detached.is_running(handle)
    assert handle["pgid"] == handle["supervisor_pid"]  # its own session: killpg ends it all
    assert _wait(lambda: "up" in detached.tail(handle["log_path"]))
    code = detached.terminate(handle, timeout_s=10)
    assert _wait(lambda: not detached.is_running(handle))
    assert code is None or code != 0


def test_detached_launch_records_the_exit_code_of_a_failing_command(tmp_path) -> None:
    handle = detached.launch(
        [sys.executable, "-c", "import sys; print('bad input', file=sys.stderr); sys.exit(2)"],
        log_path=str(tmp_path / "bad.log"),
    )
    assert _wait(lambda: detached.exit_code(handle) is not None)
    assert detached.exit_code(handle) == 2
    assert not detached.is_running(handle)
    assert "bad input" in detached.tail(handle["log_path"])
