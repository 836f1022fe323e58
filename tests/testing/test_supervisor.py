"""The supervised user job's supervisor (`_testing.supervisor`, test tooling) with tiny commands,
no Spark: it restarts as its policy says, logs each exit code, backs off, and stops as one
process group."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from airflow_samza_expand._testing.supervisor import (
    Supervised,
    backoff,
    descendants,
    should_restart,
    supervise,
)

pytestmark = pytest.mark.timeout(120)


def test_on_failure_restarts_failures_until_max_restarts_and_logs_each_code(tmp_path) -> None:
    code = supervise(["sh", "-c", "exit 3"], tmp_path, policy="on-failure", backoff_s=0,
                     max_restarts=2)  # fmt: skip
    lines = (tmp_path / "exits.log").read_text().splitlines()
    assert code == 3
    assert [line.split()[2] for line in lines] == ["code=3"] * 3, lines
    assert [line.split()[4] for line in lines] == ["next=restart", "next=restart", "next=end"]
    assert sorted(p.name for p in tmp_path.glob("attempt-*.log")) == [
        "attempt-1.log", "attempt-2.log", "attempt-3.log"]  # fmt: skip


def test_on_failure_ends_on_a_clean_exit_and_always_restarts_it(tmp_path) -> None:
    assert supervise(["true"], tmp_path / "a", policy="on-failure", backoff_s=0) == 0
    assert len((tmp_path / "a" / "exits.log").read_text().splitlines()) == 1
    supervise(["true"], tmp_path / "b", policy="always", backoff_s=0, max_restarts=1)
    lines = (tmp_path / "b" / "exits.log").read_text().splitlines()
    assert [line.split()[4] for line in lines] == ["next=restart", "next=end"], lines


def test_the_backoff_doubles_while_attempts_die_young_up_to_its_maximum(tmp_path) -> None:
    assert [backoff(1.0, 5.0, n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 5.0]
    supervise(["false"], tmp_path, policy="on-failure", backoff_s=0.01, max_restarts=2,
              stable_s=60)  # fmt: skip
    delays = [line.split()[5] for line in (tmp_path / "exits.log").read_text().splitlines()]
    assert delays == ["delay=0.01", "delay=0.02", "delay=0"], delays


def test_a_wrong_policy_is_refused_naming_the_policies(tmp_path) -> None:
    with pytest.raises(ValueError, match="always, on-failure"):
        should_restart("sometimes", 1)
    with pytest.raises(ValueError, match="sometimes"):
        supervise(["true"], tmp_path / "s", policy="sometimes")
    assert not (tmp_path / "s").exists()


def test_a_killed_attempt_is_restarted_and_stop_ends_the_whole_group(tmp_path) -> None:
    # the attempt has a child of its own (as spark-submit has the driver's JVM and Python)
    cmd = [sys.executable, "-c", "import subprocess; subprocess.run(['sleep', '300'])"]
    job = Supervised.start(cmd, tmp_path, policy="on-failure", backoff_s=0)
    try:
        job.wait_attempts(1)
        wait(lambda: descendants(job.child_pid() or 0), "the attempt's child")
        first = job.kill_attempt()
        job.wait_attempts(2)
        (gone,) = job.exits()
        assert (gone.pid, gone.code, gone.restarted) == (first, -signal.SIGKILL, True)
        assert job.child_pid() not in (None, first)
        wait(lambda: descendants(job.child_pid() or 0), "the second attempt's child")
        group = [job.pid, job.child_pid(), *descendants(job.child_pid())]
    finally:
        job.stop()
    wait(lambda: not any(alive(p) for p in group), "the group to end")
    assert job.proc.returncode == -signal.SIGKILL


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait(check, what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_no_command_is_an_error_naming_the_fix(tmp_path, capsys) -> None:
    from airflow_samza_expand._testing.supervisor import main

    with pytest.raises(SystemExit):
        main(["--state-dir", str(tmp_path)])
    assert "give it after --" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []
