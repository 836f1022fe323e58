"""A real expansion, watched in a real headless Chromium while it runs.

The factory's expansion DAG (`live_expansion.build`: plan, expand, submit_standby, barrier,
stop_job, write_job_model, submit, ack, report) runs with ``dag.test()`` in a process of its
own against the test Kafka; the job is `throttled_job.py` standing in for ``spark-submit``
(no Spark): v1 is started by the test, reads the topic's two partitions through confluent-kafka
at a throttled rate, commits to the job's group, heartbeats and honours the stop request; the
DAG launches v2 as a warm standby that takes over once job model v2 is written.

One job page, loaded once the expansion has started, updates itself in place while the test
asserts what it shows: the producer refresh grace counting down (a burst of records produced
then leaves the throttled v1 behind at the snapshot), the barrier lag per old partition falling
between two updates, then - updated in place, never reloaded - the completed expansion: every
step with start, end and duration, the lease released, v1 stopped, v2 running, v2's log.
Screenshots: ``live-*.png`` (docs/ui/ holds copies).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import airflow_env
import pytest
from browser import Browser, wait_for
from ui_helpers import task_durations

from airflow_samza_expand.airflow._ui.running import WARMING

pytestmark = pytest.mark.kafka

HERE = Path(__file__).resolve().parent
# the DAG's producer_refresh_grace_s, from the expand step's end: dag.test() may run the
# submit_standby task (~2 s) before the barrier step records the grace; the rest must be long
# enough for the page (updated every 3 s) to show the countdown
GRACE_S = 15.0  # room for a slow CI machine: the countdown must be seen inside it
RECORDS_PER_S = 20  # v1's throttle
# records produced as the grace starts, about half into the old partitions: v1 reads ~190 of
# those during the grace, the rest (~12 s of reading) is the barrier's lag at the snapshot, so
# the page shows it fall at least once
BURST = 900


def _section(browser: Browser) -> str:
    """The running section's text as the page shows it now (no navigation)."""
    js = "(document.getElementById('running') || {}).innerText || ''"
    return browser.evaluate(js) or ""


def _fetches(browser: Browser) -> int:
    js = "+((document.getElementById('live') || {dataset: {}}).dataset.fetches || 0)"
    return int(browser.evaluate(js) or 0)


def _lags(text: str, topic: str) -> dict[int, int]:
    """Old partition -> lag, from the running section's barrier table."""
    rows = re.findall(rf"^{re.escape(topic)} (\d+)\t\d+\t\d+\t(\d+)$", text, re.M)
    return {int(p): int(lag) for p, lag in rows}


@pytest.fixture
def job_env(tmp_path, ui_kafka, kafka_bootstrap) -> Iterator[dict[str, str]]:
    """The environment of the job's processes and of the DAG run: ``spark-submit`` on PATH is
    `throttled_job.py`; ``spark_default`` a local master. Stops every launch at the end."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "spark-submit"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} {HERE / "throttled_job.py"} "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    launches = tmp_path / "launches.jsonl"
    launches.touch()
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local"}),
        "THROTTLED_JOB_LAUNCHES": str(launches),
        "THROTTLED_JOB_RECORDS_PER_S": str(RECORDS_PER_S),
        "THROTTLED_JOB_WARM_S": "0",  # the test opens THROTTLED_JOB_WARM_GATE
        "THROTTLED_JOB_RUN_S": "240",
    }
    yield env
    for line in launches.read_text().splitlines():  # the job processes this test started
        with contextlib.suppress(ProcessLookupError):
            os.kill(json.loads(line)["pid"], signal.SIGTERM)


def test_a_real_expansion_as_it_runs(
    browser, api_server, ui_kafka, kafka_bootstrap, expanded_job, ui_output, job_env, tmp_path
):
    from kafka_helpers import produce_keyed
    from live_expansion import build

    from airflow_samza_expand._kafka.admin import KafkaAdmin
    from airflow_samza_expand.core.model import JobModel
    from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

    suffix = uuid.uuid4().hex[:8]
    job = topic = f"ui-live-{suffix}"
    logs = Path(expanded_job.log_dir) / job  # under the api-server's ui_log_dirs
    logs.mkdir()
    page = f"{api_server.base}/samza-expand/jobs/{job}"
    gate = tmp_path / "standby-warm"
    job_env["THROTTLED_JOB_WARM_GATE"] = str(gate)
    spec = {"dag_id": f"ui_live_{suffix}", "job_name": job, "topic": topic,
            "bootstrap": kafka_bootstrap, "log_dir": str(logs), "grace_s": GRACE_S}  # fmt: skip
    with contextlib.ExitStack() as stack:
        admin = stack.enter_context(KafkaAdmin(ui_kafka, timeout_s=15))
        store = stack.enter_context(KafkaCoordinatorStore(ui_kafka, job))
        admin.ensure_topic(topic, 2)
        store.write_job_model(JobModel.initial(job, {topic: 2}, created_by="ui-live-test"))
        produce_keyed(ui_kafka, topic, 40)
        v1 = stack.enter_context(_process(  # the running job, v1
            [str(HERE / "throttled_job.py"), "--job-name", job, "--bootstrap-servers",
             kafka_bootstrap], job_env, logs / "v1.log",
        ))  # fmt: skip
        # the plan step picks the restart from v1's heartbeat (its standby capability)
        wait_for(lambda: store.processors(), 60, "v1's first heartbeat")
        airflow_env.serialize_dag_to_db(build(**spec))
        run_log = tmp_path / "dag-run.log"
        runner = stack.enter_context(
            _process([str(HERE / "live_expansion.py"), json.dumps(spec)], job_env, run_log)
        )

        def grown():  # the expand step ended: the producer refresh grace runs from here
            assert runner.poll() is None, run_log.read_text()[-4000:]
            return next((r for r in store.expansions() if "expand" in r.steps
                         and r.steps["expand"].ended_at), None)  # fmt: skip

        record = wait_for(grown, 120, "the expand step")
        grew = lambda: admin.partition_counts([topic])[topic] == 4  # noqa: E731
        wait_for(grew, 30, "the broker's metadata to list 4 partitions")
        # new traffic from an up-to-date producer: the throttled v1 is behind at the snapshot
        produce_keyed(ui_kafka, topic, BURST, prefix=f"burst-{suffix}")

        # 1. the grace: its step and its countdown (once the barrier step's first poll recorded
        # the grace's end), on a page loaded while the expansion runs
        assert browser.open(page) == 200
        text = wait_for(lambda: _shows(browser, "s left of"), GRACE_S + 5, "the grace countdown")
        assert f"Expansion under way: {record.expansion_id}" in text, text
        assert "Step barrier (grace and snapshot) (waiting out the producer refresh" in text, text
        assert "status expanded" in text, text
        left = re.search(rf"Producer refresh grace: (\d+) s left of {GRACE_S:.1f} s", text)
        assert left is not None and 0 <= int(left.group(1)) <= GRACE_S, text
        top = wait_for(lambda: _next(browser), 10, "the top line")
        assert f"expansion {record.expansion_id} (expanded" in top, top
        assert "it waits on the producer refresh grace" in top, top
        browser.screenshot(ui_output / "live-grace.png")
        browser.evaluate("window.watching = 'this document'")  # gone if the page reloads

        # 2. the barrier drains: the lag per old partition, falling from one update to the next
        first = wait_for(lambda: _draining(browser, topic), 60, "the barrier lag")
        snapshot = store.get_expansion(record.expansion_id).barrier[topic]
        for partition, offset in snapshot.items():
            assert re.search(rf"^{topic} {partition}\t{offset}\t\d+\t\d+$", first, re.M), first
        assert "Step barrier (drain) (running)" in first, first
        blocked = f"Next: barrier of expansion {record.expansion_id} blocked by lag "
        wait_for(lambda: _next(browser).startswith(blocked), 20, "the blocked barrier on top")
        assert "status barrier-snapshot" in first, first
        before = _lags(first, topic)
        seen = _fetches(browser)
        second = wait_for(
            lambda: _fetches(browser) > seen and _shows(browser, "Expansion under way"),
            20,
            "the section's next update",
        )
        after = _lags(second, topic)  # every partition's lag lower or zero, the total lower
        assert set(after) == {0, 1} and all(after[p] <= before[p] for p in before), (before, after)
        assert 0 < sum(after.values()) < sum(before.values()), (before, after)
        browser.screenshot(ui_output / "live-barrier.png")
        chart = "document.querySelectorAll('#running svg.lag polyline').length"
        assert browser.evaluate(chart) == 3  # the total and both old partitions

        # 3. the barrier held; the standby of v2 warms up (until the test opens its gate)
        text = wait_for(
            lambda: _shows(browser, "warming up for job model v2") and _shows(browser, WARMING),
            60,
            "the standby's log, the stop step waiting for its warm-up",
        )
        assert "Step stop_job (" in text, text  # the DAG's task id
        standby = store.get_expansion(record.expansion_id).results["standby"]["launches"][0]
        assert "Launched by step submit_standby" in text, text
        assert f"(pid {standby['pid']})" in text, text
        assert f"New version: py-{standby['pid']} (standby): starting - warming up" in text, text
        assert f"Current launch's log {standby['log_path']} (tail)" in text, text
        browser.screenshot(ui_output / "live-standby.png")
        assert browser.evaluate("window.watching") == "this document"  # updated in place
        gate.touch()

        # 4. completed: the open page shows it, in place
        runner.wait(240)
        result = json.loads(run_log.read_text().strip().splitlines()[-1])
        assert result["state"] == "success", result
        wait_for(
            lambda: "Expansion under way" not in (t := browser.text()) and "Leases" in t,
            20,
            "the page to show the completed expansion",
        )
        assert browser.evaluate("window.watching") == "this document"
        text = browser.text()
        browser.screenshot(ui_output / "live-completed.png")
        done = store.get_expansion(record.expansion_id)
    assert done.status.value == "completed" and f"{record.expansion_id} completed" in text
    assert set(done.steps) >= {"plan", "expand", "barrier_snapshot", "barrier", "standby",
                               "stop", "write", "submit", "ack", "report"}  # fmt: skip
    # every task instance of the run, Airflow's durations, linked to the task's log
    durations = task_durations(spec["dag_id"], result["run_id"])
    assert set(durations) == set(result["tasks"]) and "submit_standby" in durations, durations
    for task, seconds in durations.items():
        row = re.search(rf"^{task}\tsuccess\t[^\t]+\t[^\t]+\t(\d+\.\d) s\t(.*)$", text, re.M)
        assert row is not None and float(row.group(1)) == round(seconds, 1), (task, text)
        href = f"/tasks/{task}"
        links = f"[...document.querySelectorAll('#live a[href$=\"{href}\"]')].length"
        assert browser.evaluate(links) == 1, href
        # the protocol's own time only where it means something else: the barrier's two phases
        assert bool(row.group(2)) == (task == "barrier"), (task, row.group(2))
    barrier = re.search(r"^barrier\t.*\tprotocol's step time: grace and snapshot (\d+\.\d) s; "
                        r"drain (\d+\.\d) s$", text, re.M)  # fmt: skip
    assert barrier is not None and float(barrier.group(1)) > 0 < float(barrier.group(2)), text
    run = SimpleNamespace(dag_id=spec["dag_id"], run_id=result["run_id"])
    seconds = airflow_env.task_instance_xcom(run, "report")["seconds_per_step"]
    assert None not in seconds.values(), seconds  # the report times every step too
    holder = f"airflow:{spec['dag_id']}/{result['run_id']}"
    assert re.search(rf"^expansion\t{re.escape(holder)}\t1\t[^\t]+\treleased$", text, re.M), text
    assert "expires in" not in text and "expired" not in text
    assert f"py-{v1.pid}\t-\tstopped\t1\t" in text and "dead" not in text, text
    assert re.search(rf"^py-{standby['pid']}\t\S+\trunning\t2\t.*\talive\t", text, re.M), text
    assert "does not read" not in text and "Traceback" not in text
    log = text.split("Restarted job's log\n")[1]
    assert log.startswith(f"\n{standby['log_path']} (tail)"), log[:300]
    assert f"processor py-{standby['pid']}: " in log, log  # the restarted job's own lines
    # the takeover is in that log; the page's tail may have moved past it under load (the job
    # logs each commit), so it is looked up in the whole file the page names
    whole = Path(standby["log_path"]).read_text()
    assert f"standby py-{standby['pid']}: job model v2 written, taking over" in whole, log
    assert f"processor py-{standby['pid']}: running job model v2" in whole, log

    # 5. the job is killed while the page is open: the top line says so first
    os.kill(standby["pid"], signal.SIGTERM)
    down = f"Next: no processor of job {job} runs: start the job (it reads job model v2)"
    wait_for(lambda: _next(browser).startswith(down), 30, "the dead job on top")
    assert browser.evaluate("window.watching") == "this document"  # updated in place
    assert re.search(rf"^py-{standby['pid']}\t\S+\tfailed\t2\t.*\tdead\t", _live(browser),
                     re.M), _live(browser)  # fmt: skip
    browser.screenshot(ui_output / "live-job-down.png")
    print(f"\nscreenshots: {ui_output}")


@contextlib.contextmanager
def _process(args: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen]:
    """``python *args`` in its own process group, its output to `log`; killed (by pid) at the
    end if it still runs."""
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, *args], env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


def _next(browser: Browser) -> str:
    """The page's top line: the operator's next action."""
    return browser.evaluate("(document.getElementById('next') || {}).innerText || ''") or ""


def _live(browser: Browser) -> str:
    return browser.evaluate("(document.getElementById('live') || {}).innerText || ''") or ""


def _shows(browser: Browser, needle: str) -> str:
    """The running section's text if it holds `needle`, else ""."""
    text = _section(browser)
    return text if needle in text else ""


def _draining(browser: Browser, topic: str) -> str:
    text = _section(browser)
    return text if sum(_lags(text, topic).values()) > 0 else ""
