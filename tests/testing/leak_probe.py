"""Run only by tests/testing/test_session_cleanup.py (in a pytest subprocess): starts what a
test run leaks when it is killed or fails - a temporary Airflow home, a detached launch (as the
DAG starts Spark jobs) and a plain child - records them in $LEAK_PROBE_DIR, then hangs or fails
($LEAK_PROBE_MODE)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "airflow"))
PROBE_DIR = os.environ.get("LEAK_PROBE_DIR")


@pytest.mark.skipif(not PROBE_DIR, reason="only run by test_session_cleanup.py")
def test_probe() -> None:
    import airflow_env

    from airflow_samza_expand._protocol.job import launch as detached

    out = Path(str(PROBE_DIR))
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
    handle = detached.launch(sleeper, log_path=str(out / "detached.log"))
    child = subprocess.Popen(sleeper)
    pids = [int(handle["pid"]), int(handle["supervisor_pid"]), child.pid]
    record = {"pids": pids, "home": str(airflow_env.AIRFLOW_HOME)}
    (out / "probe.json").write_text(json.dumps(record))
    if os.environ.get("LEAK_PROBE_MODE") == "hang":
        time.sleep(600)
    raise AssertionError("the probe fails on purpose")
