"""`samza-expand dev broker` runs in the foreground, logs, stops on SIGTERM; bad input exits 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from airflow_samza_expand.cli import main


def test_bad_port_is_refused(capsys) -> None:
    assert main(["dev", "broker", "--port", "70000"]) == 2
    err = capsys.readouterr().err
    assert "error: --port 70000 is not a TCP port" in err


def test_data_dir_that_is_a_file_is_refused(tmp_path: Path, capsys) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    assert main(["dev", "broker", "--port", "0", "--data-dir", str(target)]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert target.read_text() == "x"


def test_foreground_run_logs_and_stops_on_sigterm(tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from airflow_samza_expand.cli import main; sys.exit(main())",
            "dev",
            "broker",
            "--port",
            "0",
            "--ready-file",
            str(ready),
            "--log-level",
            "DEBUG",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, "broker never wrote its ready file"
            time.sleep(0.05)
        info = json.loads(ready.read_text())
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{info['port']}"})
        assert admin.list_topics(timeout=10).brokers
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert "development Kafka broker listening on 127.0.0.1:" in out
    assert "Metadata v" in out  # each request is logged at DEBUG
    assert "connection from 127.0.0.1" in out
    assert "development Kafka broker stopped" in out


PARENT_THAT_DIES = """
import os
from airflow_samza_expand._testing import DevBrokerProcess
broker = DevBrokerProcess().start()
print(broker.pid, flush=True)
os._exit(0)  # no stop(): like a test session killed by a timeout
"""


def _exited(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


def test_broker_stops_when_its_parent_dies_without_cleanup() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PARENT_THAT_DIES],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    pid = int(out.split()[0])
    deadline = time.monotonic() + 20
    while not _exited(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)  # the broker this test started; do not leak it
            raise AssertionError("orphaned development broker kept running")
        time.sleep(0.1)
