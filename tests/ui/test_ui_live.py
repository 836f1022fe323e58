"""A real expansion, watched in a real headless Chromium while it runs (issue 28, "Done when").

The factory's expansion DAG (`live_expansion.build`: plan, expand, submit_standby, barrier,
stop_job, write_job_model, submit, ack, report) runs with ``dag.test()`` in a process of its
own against the test Kafka; the job is `throttled_job.py` standing in for ``spark-submit``
(no Spark): v1 is started by the test, reads the topic's two partitions through confluent-kafka
at a throttled rate, commits to the job's group, heartbeats and honours the stop request; the
DAG launches v2 as a warm standby that takes over once job model v2 is written.

One job page, loaded once the expansion has started, updates itself in place while the test
asserts what it shows: the producer refresh grace counting down (a burst of records produced
then leaves the throttled v1 behind at the snapshot), the barrier lag per old partition falling
between two updates, then - after the page reloads itself - the completed expansion: every
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
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import airflow_env
import pytest
from browser import Browser, chromium_binary, wait_for

pytestmark = pytest.mark.kafka

HERE = Path(__file__).resolve().parent
GRACE_S = 10.0  # the DAG's producer_refresh_grace_s: long enough to see it count down
RECORDS_PER_S = 20  # v1's throttle
BURST = 900  # records produced during the grace: about half land in the old partitions


@pytest.fixture(scope="module")
def browser(api_server, token) -> Iterator[Browser]:
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no Chromium: run scripts/setup.sh as root (apt-get install chromium)")
    with Browser(binary) as chromium:
        chromium.set_cookie(api_server.base, "_token", token)  # the UI's session cookie
        yield chromium


def _section(browser: Browser) -> str:
    """The running section's text as the page shows it now (no navigation)."""
    js = "(document.getElementById('running') || {}).innerText || ''"
    return browser.evaluate(js) or ""


def _fetches(browser: Browser) -> int:
    js = "+((document.getElementById('running') || {dataset: {}}).dataset.fetches || 0)"
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
        "THROTTLED_JOB_WARM_S": "2",
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

    from airflow_samza_expand.core.model import JobModel
    from airflow_samza_expand.kafka.admin import KafkaAdmin
    from airflow_samza_expand.store.kafka import KafkaCoordinatorStore

    from live_expansion import build

    suffix = uuid.uuid4().hex[:8]
    job, topic = f"ui-live-{suffix}", f"ui-live-{suffix}"
    logs = Path(expanded_job.log_dir) / job  # under the api-server's ui_log_dirs
    logs.mkdir()
    base = f"{api_server.base}/samza-expand/jobs/{job}"
    with KafkaAdmin(ui_kafka, timeout_s=15) as admin, KafkaCoordinatorStore(ui_kafka, job) as store:
        admin.ensure_topic(topic, 2)
        store.write_job_model(JobModel.initial(job, {topic: 2}, created_by="ui-live-test"))
        produce_keyed(ui_kafka, topic, 40)
        args = ["--job-name", job, "--bootstrap-servers", kafka_bootstrap]
        with open(logs / "v1.log", "wb") as v1_log:
            v1 = subprocess.Popen(  # the running job, v1
                [sys.executable, str(HERE / "throttled_job.py"), *args],
                env=job_env, stdout=v1_log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        try:
            _run(browser, api_server, admin, store, job, topic, logs, base, ui_output, job_env,
                 tmp_path, build, kafka_bootstrap, ui_kafka, v1)  # fmt: skip
        finally:
            if v1.poll() is None:
                v1.kill()
            v1.wait(30)


def _run(browser, api_server, admin, store, job, topic, logs, base, ui_output, job_env,
         tmp_path, build, kafka_bootstrap, ui_kafka, v1) -> None:  # fmt: skip
    from kafka_helpers import produce_keyed

    from airflow_samza_expand.kafka.barrier import barrier_status

    def caught_up() -> bool:  # v1 has read the 40 records: no lag before the expansion
        status = barrier_status(admin, job, admin.high_watermarks({topic: [0, 1]}))
        return status.total_lag == 0

    wait_for(caught_up, 60, "v1 to read the first records")
    spec = {"dag_id": f"ui_live_{job.replace('-', '_')}", "job_name": job, "topic": topic,
            "bootstrap": kafka_bootstrap, "log_dir": str(logs), "grace_s": GRACE_S}  # fmt: skip
    airflow_env.serialize_dag_to_db(build(**spec))
    run_log = tmp_path / "dag-run.log"
    with open(run_log, "wb") as out:
        runner = subprocess.Popen(
            [sys.executable, str(HERE / "live_expansion.py"), json.dumps(spec)],
            env=job_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:

        # 1. the grace: the barrier step records it at its first poll
        def in_grace():
            assert runner.poll() is None, run_log.read_text()[-4000:]
            for record in store.expansions():
                if record.results.get("grace", {}).get("ends_at") and not record.barrier:
                    return record
            return None

        record = wait_for(in_grace, 120, "the barrier step to start the grace")
        produce_keyed(ui_kafka, topic, BURST, prefix=f"burst-{job}")  # v1 falls behind
        assert browser.open(base) == 200
        grace = wait_for(
            lambda: "s left of" in (t := _section(browser)) and t, GRACE_S, "the grace countdown"
        )
        print(grace)
        browser.screenshot(ui_output / "live-grace.png")
        browser.evaluate("window.watching = 'this document'")  # gone if the page reloads

        # 2. the barrier drains
        first = wait_for(
            lambda: sum(_lags(t := _section(browser), topic).values()) > 0 and t, 60,
            "the barrier lag",
        )
        print(first)
        seen = _fetches(browser)
        second = wait_for(
            lambda: _fetches(browser) > seen and _section(browser), 20, "the next update"
        )
        print(second)
        browser.screenshot(ui_output / "live-barrier.png")
        assert browser.evaluate("window.watching") == "this document"

        # 3. completed
        out, _ = runner.communicate(timeout=240)
        print(run_log.read_text()[-2000:])
        wait_for(
            lambda: "Expansion under way" not in browser.text() and browser.text(), 20,
            "the page to reload for the completed expansion",
        )
        text = browser.text()
        print(text)
        browser.screenshot(ui_output / "live-completed.png")
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait(30)
