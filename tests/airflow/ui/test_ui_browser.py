"""The plugin's pages in a real headless Chromium, after a real expansion
(tests/airflow/ui/conftest.py).

Screenshots go to the session's ``ui-screenshots`` directory under pytest's base temp dir
(printed at the end of the test; docs/ui/*.png are copies of them).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import pytest
from browser import wait_for
from ui_helpers import http, task_durations

pytestmark = pytest.mark.kafka

# the tasks of the expansion's DAG run (its own task ids), as Airflow ran them
TASKS = ("plan", "expand", "barrier", "stop", "write", "report")
FRAME_TEXT = (
    "(() => { const f = document.querySelector('iframe');"
    " return f && f.contentDocument && f.contentDocument.body"
    " ? f.contentDocument.body.innerText : ''; })()"
)


def _ui(api_server, path: str) -> str:
    return f"{api_server.base}/samza-expand{path}"


def test_pages_show_the_expansion(browser, api_server, expanded_job, waiting_job, ui_output):
    job, topic = expanded_job.job, expanded_job.topic

    assert browser.open(_ui(api_server, "/")) == 200
    text = browser.text()
    assert job in text and "configured" in text
    browser.screenshot(ui_output / "jobs.png")

    assert browser.open(_ui(api_server, f"/jobs/{job}")) == 200
    text = browser.text()
    assert "Job model in force: v2" in text
    assert "Written by airflow:" in text  # the write step's identity
    for partition, task in ((0, "Partition 0"), (1, "Partition 1"), (2, "Partition 0")):
        assert f"[kafka, {topic}, {partition}]\t{task}" in text
    assert f"[kafka, {topic}, 3]\tPartition 1\t1\tyes" in text
    assert "v1\tui-test-job" in text  # history: v1 written by the job itself
    assert expanded_job.expansion_id in text
    durations = task_durations(expanded_job.dag_id, expanded_job.run_id)
    assert set(durations) == set(TASKS), durations
    for task in TASKS:  # each task: its state, times and Airflow's duration, linked to its log
        row = re.search(rf"^{task}\tsuccess\t[^\t]+\t[^\t]+\t(\d+\.\d) s\t", text, re.M)
        assert row is not None and float(row.group(1)) == round(durations[task], 1), task
        href = (
            f"/dags/{expanded_job.dag_id}/runs/{quote(expanded_job.run_id, safe='')}/tasks/{task}"
        )
        links = f"[...document.querySelectorAll('#live a[href$=\"{href}\"]')].length"
        assert browser.evaluate(links) == 1, href
    assert "Ordering barrier: passed at" in text and "Ordering barrier of" not in text
    assert "Next: nothing to do: job " in text  # the top line: all is well
    assert "processor-v1\t-\tstopped\t1" in text and "dead" not in text  # stopped cleanly
    assert "processor-v2\t-\trunning\t2" in text and "alive" in text
    assert "restarted job: batch 4 committed" in text
    assert "Expansion under way" not in text  # it completed
    assert "Traceback" not in text
    assert browser.evaluate("document.querySelectorAll('svg rect').length") >= 6  # the diagram
    browser.screenshot(ui_output / "job.png")

    assert browser.open(_ui(api_server, f"/jobs/{job}/diff?a=1&b=2")) == 200
    text = browser.text()
    assert f"[kafka, {topic}, 2]\tadded\t-\tPartition 0" in text
    assert "2 SSPs keep their task" in text
    browser.screenshot(ui_output / "diff.png")

    # an expansion waiting at its barrier (typed record, lease held)
    assert browser.open(_ui(api_server, f"/jobs/{waiting_job.job}")) == 200
    text = browser.text()
    assert "barrier-snapshot" in text and "waiting: lag 7" in text
    blocked = f"Next: barrier of expansion {waiting_job.expansion_id} blocked by lag 7 on "
    assert blocked + f"partition {waiting_job.topic} 1: " in text, text
    assert f"Expansion under way: {waiting_job.expansion_id}" in text
    assert "Step barrier (drain) (running) for" in text and f"{waiting_job.topic} 1\t" in text
    assert f"{waiting_job.topic}\t1\t" in text and "\t7\n" in text
    assert f"expansion\t{waiting_job.holder}\t1" in text  # lease, holder, epoch
    assert "(model reads 2)" in text  # the topic has 4 partitions, the running model reads 2
    browser.screenshot(ui_output / "job-waiting.png")

    # inside Airflow's own UI: the nav entry renders the pages in an iframe
    browser.open(f"{api_server.base}/plugin/expansions")
    framed = wait_for(
        lambda: "Jobs" in (browser.evaluate(FRAME_TEXT) or ""),
        60,
        "the plugin page inside Airflow's UI",
    )
    assert framed
    browser.screenshot(ui_output / "airflow-nav.png", full_page=False)
    print(f"\nscreenshots: {ui_output}")


def _produce_raw(config, topic: str, key: bytes, value: bytes) -> None:
    from confluent_kafka import Producer

    producer = Producer(config)
    producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0


def test_bad_input_is_a_message_not_a_stack_trace(browser, api_server, ui_kafka, ui_output):
    from airflow_samza_expand.core.model import JobModel
    from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

    status = browser.open(_ui(api_server, "/jobs/no-such-job"))
    text = browser.text()
    assert status == 404 and "Unknown job" in text and "no-such-job" in text
    assert "Traceback" not in text

    # a record whose key is no coordinator key makes the store unreadable: named, with the fix
    job = f"ui-corrupt-{uuid.uuid4().hex[:8]}"
    with KafkaCoordinatorStore(ui_kafka, job) as store:
        store.write_job_model(JobModel.initial(job, {"orders": 2}))
    _produce_raw(ui_kafka, f"__samza_coordinator_{job}", b"not-a-key", b"{}")
    status = browser.open(_ui(api_server, f"/jobs/{job}"))
    text = browser.text()
    assert status == 422 and "Corrupt coordinator record" in text
    assert "write a tombstone" in text and "Traceback" not in text
    browser.screenshot(ui_output / "corrupt.png")


def test_an_unreachable_broker_is_a_message(
    browser, api_server, expanded_job, dev_broker, ui_output
):
    """The development broker drops every metadata request (a fault a healthy broker cannot
    produce on demand): the job page says Kafka is unreachable, the jobs page still lists."""
    dev_broker.faults.inject(api="Metadata", kind="drop_connection", times=None)
    try:
        status = browser.open(_ui(api_server, f"/jobs/{expanded_job.job}"))
        text = browser.text()
        browser.screenshot(ui_output / "unreachable.png")
        jobs_status = browser.open(_ui(api_server, "/"))
        jobs_text = browser.text()
    finally:
        dev_broker.faults.clear()
    assert status == 503 and "Kafka is unreachable" in text, text
    assert "Traceback" not in text
    # the jobs page still lists the configured jobs, with the problem above them
    assert jobs_status == 200 and "Kafka is unreachable" in jobs_text
    assert expanded_job.job in jobs_text and "Traceback" not in jobs_text


def _view_route(api_server, token) -> str:
    """The external view's route in Airflow's UI, as the api-server lists the plugin."""
    status, body = http("GET", f"{api_server.base}/api/v2/plugins", token=token)
    assert status == 200, body
    plugin = next(p for p in json.loads(body)["plugins"] if p["name"] == "samza_expand")
    return plugin["external_views"][0]["url_route"]


def _frame_path() -> str:
    return "document.querySelector('iframe').contentWindow.location.pathname"


def test_report_step_links_to_the_job_page_inside_airflows_ui(
    browser, api_server, token, expanded_job, ui_output
):
    """The extra link opens Airflow's UI (navigation and all) with the job page in the
    external view's iframe: ``/plugin/<url_route>/<the page's own path>``, the deep link
    Airflow's UI keeps in step with the iframe."""
    url = (
        f"{api_server.base}/api/v2/dags/{expanded_job.dag_id}/dagRuns/"
        f"{quote(expanded_job.run_id, safe='')}"
        "/taskInstances/report/links"
    )
    status, body = http("GET", url, token=token)
    assert status == 200, body
    link = json.loads(body)["extra_links"]["Expansion job page"]
    route = _view_route(api_server, token)
    page = f"/samza-expand/jobs/{expanded_job.job}"
    assert link == f"{api_server.base}/plugin/{route}{page}"

    browser.open(link)
    wait_for(
        lambda: "Job model in force: v2" in (browser.evaluate(FRAME_TEXT) or ""),
        60,
        "the job page inside Airflow's UI",
    )
    assert browser.evaluate(_frame_path()) == page
    browser.screenshot(ui_output / "airflow-job.png", full_page=False)


def test_the_browse_entry_lands_on_a_plain_url(browser, api_server, token):
    route = _view_route(api_server, token)
    browser.open(f"{api_server.base}/plugin/{route}")
    wait_for(lambda: "Jobs" in (browser.evaluate(FRAME_TEXT) or ""), 60, "the jobs page")
    path = wait_for(
        lambda: (
            browser.evaluate("location.pathname") != f"/plugin/{route}"
            and browser.evaluate("location.pathname")
        ),
        10,
        "Airflow's UI to follow the iframe",
    )
    assert path == f"/plugin/{route}/samza-expand/"
    assert "samza-expand/samza-expand" not in path


def _running_text(browser, api_server, job: str) -> str:
    assert browser.open(_ui(api_server, f"/jobs/{job}")) == 200
    return browser.text()


def _section(browser, needle: str) -> str:
    """The running section's text when it holds `needle` (read in place, no navigation)."""
    text = browser.evaluate("(document.getElementById('running') || {}).innerText || ''") or ""
    return text if needle in text else ""


def test_an_expansion_as_it_runs(browser, api_server, ui_kafka, ui_output, expanded_job):
    """An expansion written step by step with the typed store API while the browser watches:
    the grace, the barrier draining (lag falls), then completed with its lease released."""
    from kafka_helpers import commit_offsets, produce_keyed
    from ui_helpers import planned_record

    from airflow_samza_expand._kafka.admin import KafkaAdmin
    from airflow_samza_expand._protocol.barrier import progress
    from airflow_samza_expand.core._clock import now_iso
    from airflow_samza_expand.core._plan import plan_expansion
    from airflow_samza_expand.core._record import ExpansionStatus as S
    from airflow_samza_expand.core.model import JobModel
    from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

    suffix = uuid.uuid4().hex[:8]
    job, topic = f"ui-running-{suffix}", f"ui-running-{suffix}"
    with KafkaAdmin(ui_kafka, timeout_s=15) as admin, KafkaCoordinatorStore(ui_kafka, job) as store:
        admin.ensure_topic(topic, 2)
        v1 = store.write_job_model(JobModel.initial(job, {topic: 2}))
        produce_keyed(ui_kafka, topic, 40)
        lease = store.acquire_lease("expansion", f"airflow:run-{suffix}", ttl_s=600)
        store.heartbeat("processor-v1", 1, "running", ttl_s=30)
        started = now_iso()
        record = store.put_expansion(
            planned_record(v1, {topic: 4}, lease.holder).with_step("expand", started_at=started),
            expected_revision=0,
        )
        admin.create_partitions(topic, 4)
        record = store.put_expansion(
            record.advance(S.EXPANDED).with_step("expand", started_at=started, ended_at=now_iso()),
            expected_revision=record.revision,
        )
        text = _running_text(browser, api_server, job)  # 1. the producer refresh grace
        assert f"Expansion under way: {record.expansion_id}" in text
        assert "Step barrier (grace and snapshot)" in text
        assert "Producer refresh grace: running" in text
        record = progress.begin_barrier(  # the barrier step's first poll records the grace
            store, record.expansion_id, time.time() + 120, fence=lease
        )
        text = _running_text(browser, api_server, job)
        assert "Step barrier (grace and snapshot) (waiting out the producer refresh grace" in text
        left = int(text.split("Producer refresh grace: ")[1].split(" s left of 1")[0])
        assert 100 < left <= 120, text
        browser.screenshot(ui_output / "running-grace.png")
        browser.evaluate("window.watching = 'this document'")  # gone if the page reloads

        highs = admin.high_watermarks({topic: [0, 1]})[topic]
        snapped = record.advance(S.BARRIER_SNAPSHOT, barrier={topic: dict(highs)}).with_step(
            "barrier_snapshot",
            started_at=record.steps["barrier_snapshot"].started_at,
            ended_at=now_iso(),
        )
        record = store.put_expansion(
            snapped.with_step("barrier", started_at=now_iso()), expected_revision=record.revision
        )
        lags = []
        for behind in (9, 4, 0):  # 2. the barrier drains: the job commits towards it
            store.heartbeat("processor-v1", 1, "running", ttl_s=30)  # the job runs
            commit_offsets(ui_kafka, job, topic, {0: highs[0], 1: highs[1] - behind})
            progress.note_lag(store, record.expansion_id, {topic: {0: 0, 1: behind}}, fence=lease)
            row = f"{topic} 1\t{highs[1]}\t{highs[1] - behind}\t{behind}"
            text = wait_for(lambda row=row: _section(browser, row), 20, f"lag {behind} shown")
            assert "Step barrier (drain) (running)" in text
            if behind == 9:  # the top line: what blocks the barrier, where
                blocked = f"barrier of expansion {record.expansion_id} blocked by lag 9 on "
                wait_for(lambda b=blocked: _if(_next(browser), b), 20, "the blocked barrier")
                assert f"{blocked}partition {topic} 1: " in _next(browser), _next(browser)
            lags.append(int(text.split(f"{topic} 1\t{highs[1]}\t")[1].split("\t")[1].split()[0]))
            if behind == 4:
                browser.screenshot(ui_output / "running-barrier.png")
        assert lags == [9, 4, 0]
        assert browser.evaluate("window.watching") == "this document"  # updated, not reloaded
        chart = "document.querySelectorAll('#running svg.lag polyline').length"
        assert browser.evaluate(chart) == 3  # the lag chart: total and both old partitions
        record = store.get_expansion(record.expansion_id)

        for step, status in (("barrier", S.BARRIER_PASSED), ("stop", S.JOB_STOPPED)):
            stamp = record.steps[step].started_at if step in record.steps else now_iso()
            record = store.put_expansion(
                record.advance(status).with_step(step, started_at=stamp, ended_at=now_iso()),
                expected_revision=record.revision,
            )
            if status == S.BARRIER_PASSED:  # passed: from the record alone, nothing waits
                top = wait_for(lambda: _if(_next(browser), "waits on the stop of v1"), 20, "pass")
                assert "is under way" in top and "blocked" not in top, top
                text = _live(browser)
                assert "Ordering barrier of" not in text and "waiting" not in text, text
                assert "Ordering barrier: passed at" in text and "The barrier passed at" in text
        store.heartbeat("processor-v1", 1, "stopped", ttl_s=30, uncovered={topic: [2, 3]})
        log = Path(expanded_job.log_dir) / f"standby-{suffix}.log"  # 3. the standby warms up
        log.write_text("standby: JVM up\nstandby: SparkSession ready, waiting for the lease\n")
        launch = {"pid": 4242, "log_path": str(log), "started_at": now_iso()}
        record = store.put_expansion(
            record.with_step("standby", started_at=now_iso(), ended_at=now_iso()).with_result(
                "standby", {"launches": [launch]}
            ),
            expected_revision=record.revision,
        )
        store.heartbeat("processor-v2", 2, "starting", role="standby", ttl_s=30)
        text = wait_for(
            lambda: _section(browser, "SparkSession ready, waiting for the lease"), 20, "the log"
        )
        assert "Step write_job_model (writing the new job model)" in text
        assert "Launched by step submit_standby" in text and "(pid 4242)" in text
        assert "processor-v2 (standby): starting - warming up" in text
        assert browser.evaluate("window.watching") == "this document"
        browser.screenshot(ui_output / "running-standby.png")
        store.write_job_model(plan_expansion(v1, {topic: 2}, {topic: 4}).new_job_model)
        for step, status in (
            ("write", S.JOB_MODEL_WRITTEN),
            ("submit", S.SUBMITTED),
            ("ack", S.COMPLETED),
        ):
            stamp = now_iso()
            record = store.put_expansion(
                record.advance(status).with_step(step, started_at=stamp, ended_at=now_iso()),
                expected_revision=record.revision,
            )
        store.heartbeat("processor-v2", 2, "running", ttl_s=30)
        store.release_lease(lease)
    wait_for(  # once done, the page shows the completed state (in place)
        lambda: "completed" in browser.text() and "Expansion under way" not in browser.text(),
        20,
        "the page to show the completed expansion",
    )
    assert browser.evaluate("window.watching") == "this document"

    text = _running_text(browser, api_server, job)  # 4. completed
    assert "Expansion under way" not in text and "completed" in text
    done = ("plan", "expand", "barrier (drain)", "stop_job", "write_job_model", "submit", "ack")
    for step in done:  # no DAG run here: the record's steps, labelled as the protocol's
        row = next(line for line in text.splitlines() if line.startswith(f"{step}\t"))
        assert "-" not in row.split("\t")[1:4], row  # start, end, duration
    assert "step time (protocol's record)" in text
    assert f"expansion\tairflow:run-{suffix}\t1\t" in text and "released" in text
    assert "expires in" not in text and "expired" not in text
    assert "does not read" not in text  # the stopped v1 processor gets no coverage warning
    assert "processor-v1\t-\tstopped\t1\t" in text and "dead" not in text
    browser.screenshot(ui_output / "running-completed.png")

    # 5. a second expansion, 4 -> 8: its grace runs; the first one's barrier is history
    with KafkaAdmin(ui_kafka, timeout_s=15) as admin, KafkaCoordinatorStore(ui_kafka, job) as store:
        v2 = store.latest_job_model()
        again = store.acquire_lease("expansion", f"airflow:run2-{suffix}", ttl_s=600)
        store.heartbeat("processor-v2", 2, "running", ttl_s=30)
        admin.create_partitions(topic, 8)
        stamp = now_iso()
        second = store.put_expansion(
            planned_record(v2, {topic: 8}, again.holder)
            .advance(S.EXPANDED)
            .with_step("expand", started_at=stamp, ended_at=now_iso()),
            expected_revision=0,
        )
        progress.begin_barrier(store, second.expansion_id, time.time() + 120, fence=again)
    top = wait_for(lambda: _if(_next(browser), second.expansion_id), 20, "the second expansion")
    assert re.search(r"it waits on the producer refresh grace \(1[012]\d s left\), then the "
                     "barrier snapshot$", top), top  # fmt: skip
    text = _live(browser)
    assert "Ordering barrier of" not in text and "holds" not in text, text
    assert text.count("Ordering barrier: passed at") == 1  # the first expansion's, as history
    assert "Ordering barrier: not taken yet" in text
    browser.screenshot(ui_output / "running-second.png")


def _live(browser) -> str:
    """The job page's live content as shown now (read in place, no navigation)."""
    return browser.evaluate("(document.getElementById('live') || {}).innerText || ''") or ""


FAILURES = "+((document.getElementById('live') || {dataset: {}}).dataset.failures || 0)"


def _ticks_between_fetches(browser) -> bool:
    """The status box's text changed while no fetch failed anew: its age counts by itself."""
    failures, before = browser.evaluate(FAILURES), _status(browser)
    wait_for(lambda: _status(browser) != before, 5, "the status box to change")
    return browser.evaluate(FAILURES) == failures


def _next(browser) -> str:
    """The job page's top line: the operator's next action."""
    return browser.evaluate("(document.getElementById('next') || {}).innerText || ''") or ""


def _status(browser) -> str:
    """The job page's line saying when it was last updated (or why not)."""
    js = "(document.getElementById('live-status') || {}).innerText || ''"
    return browser.evaluate(js) or ""


def _if(text: str, needle: str) -> str:
    return text if needle in text else ""


def _heartbeat_age(text: str, processor: str) -> float:
    match = re.search(rf"^{re.escape(processor)}\t.*\t(\d+\.\d) s\t", text, re.M)
    assert match is not None, text
    return float(match.group(1))


def _expires_in(text: str) -> float:
    match = re.search(r"expires in (\d+\.\d) s unless renewed", text)
    assert match is not None, text
    return float(match.group(1))


def test_the_job_page_stays_true_while_it_is_open(browser, api_server, ui_kafka, ui_output):
    """A page opened before an expansion notices it (no reload), with
    Kafka's new count; a heartbeat's age counts up and a lease's expiry counts down."""
    from ui_helpers import planned_record

    from airflow_samza_expand._kafka.admin import KafkaAdmin
    from airflow_samza_expand.core._clock import now_iso
    from airflow_samza_expand.core._record import ExpansionStatus as S
    from airflow_samza_expand.core.model import JobModel
    from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

    suffix = uuid.uuid4().hex[:8]
    job, topic = f"ui-open-{suffix}", f"ui-open-{suffix}"
    with KafkaAdmin(ui_kafka, timeout_s=15) as admin, KafkaCoordinatorStore(ui_kafka, job) as store:
        admin.ensure_topic(topic, 2)
        v1 = store.write_job_model(JobModel.initial(job, {topic: 2}))
        store.heartbeat("processor-a", 1, "running", ttl_s=600)  # one heartbeat, then silent
        lease = store.acquire_lease("expansion", f"airflow:run-{suffix}", ttl_s=600)

        assert browser.open(_ui(api_server, f"/jobs/{job}")) == 200
        browser.evaluate("window.watching = 'this document'")  # gone if the page reloads
        text = _live(browser)
        assert "Expansion under way" not in text and f"live in Kafka: {topic}: 2" in text, text
        age, expires = _heartbeat_age(text, "processor-a"), _expires_in(text)

        # 2. the heartbeat ages and the lease's expiry comes nearer while the page is open
        wait_for(
            lambda: _heartbeat_age(_live(browser), "processor-a") >= age + 2,
            30,
            "the heartbeat's age to count",
        )
        assert _expires_in(_live(browser)) <= expires - 2
        assert "Live: updated" in _status(browser), _status(browser)

        # 6. times in the time zone the user chose in Airflow's UI (kept in the browser)
        browser.evaluate("localStorage.setItem('timezone', JSON.stringify('Asia/Tokyo'))")
        try:
            wait_for(lambda: "times in Asia/Tokyo" in _status(browser), 10, "the time zone")
            shown = re.search(
                r"^processor-a\t.*\t(\d\d):(\d\d):\d\d \(\d+ s ago\)\t", _live(browser), re.M
            )
        finally:
            browser.evaluate("localStorage.removeItem('timezone')")
        assert shown is not None, _live(browser)
        utc = datetime.now(UTC)
        minutes = int(shown.group(1)) * 60 + int(shown.group(2)) - (utc.hour * 60 + utc.minute)
        assert minutes % 1440 in range(538, 542), (shown.group(0), utc)  # UTC+9, give or take

        # 1. an expansion starts: the open page shows it, and Kafka's new count
        admin.create_partitions(topic, 4)
        stamp = now_iso()
        record = store.put_expansion(
            planned_record(v1, {topic: 4}, lease.holder)
            .advance(S.EXPANDED)
            .with_step("expand", started_at=stamp, ended_at=now_iso()),
            expected_revision=0,
        )
        text = wait_for(
            lambda: _if(_live(browser), f"Expansion under way: {record.expansion_id}"),
            30,
            "the expansion to appear on the open page",
        )
        assert f"live in Kafka: {topic}: 4 (model reads 2)" in text, text
        # 5. the step by the DAG's task id
        assert "Step barrier (grace and snapshot) (" in text, text
        assert browser.evaluate("window.watching") == "this document"  # no reload
        browser.screenshot(ui_output / "live-page-started.png")


def test_a_failed_update_shows_itself_and_recovers(
    browser, api_server, token, expanded_job, dev_broker, ui_output
):
    """A fetch the server refuses (503 while Kafka is unreachable, 401 once
    the session is gone) says so above the content, which stays; the page recovers by itself."""
    assert browser.open(_ui(api_server, f"/jobs/{expanded_job.job}")) == 200
    browser.evaluate("window.watching = 'this document'")
    fetches = "+(document.getElementById('live').dataset.fetches || 0)"
    wait_for(lambda: browser.evaluate(fetches) >= 1, 30, "the page's first update")
    assert _status(browser).startswith("Live: updated"), _status(browser)

    # a form in use is not replaced under the user's hands: newer content waits for it
    browser.evaluate("var f = document.querySelector('#live select'); f.inUse = 1; f.focus()")
    wait_for(lambda: "held while you select" in _status(browser), 30, "the update to be held")
    assert browser.evaluate("document.querySelector('#live select').inUse") == 1
    browser.evaluate("document.activeElement.blur()")
    seen = browser.evaluate(fetches)
    wait_for(lambda: browser.evaluate(fetches) > seen, 30, "the update after the form")
    assert "held" not in _status(browser)

    assert re.search(r"^processor-v2\t.*\talive\t", _live(browser), re.M), _live(browser)
    dev_broker.faults.inject(api="Metadata", kind="drop_connection", times=None)
    try:
        status = wait_for(
            lambda: _if(_status(browser), "Not updated since"),
            60,
            "the page to say it is not updated",
        )
        # stale: what the last update judged reads unknown; the box's age counts every second
        wait_for(lambda: browser.evaluate(FAILURES) >= 1, 10, "the failed fetch counted")
        text = _live(browser)
        assert re.search(r"^processor-v2\t.*\tunknown\t", text, re.M), text
        assert "\talive\t" not in text, text
        assert _next(browser).startswith("As of the last update (not current): Next: ")
        wait_for(lambda: _ticks_between_fetches(browser), 30, "the box's age to count")
        browser.screenshot(ui_output / "live-page-failed.png")
    finally:
        dev_broker.faults.clear()
    assert "the server answered 503: Kafka is unreachable" in status, status
    assert "Job model in force: v2" in _live(browser)  # the last good content stays
    seen = browser.evaluate(fetches)
    wait_for(lambda: _status(browser).startswith("Live: updated"), 60, "the page to recover")
    assert browser.evaluate(fetches) > seen
    assert re.search(r"^processor-v2\t.*\talive\t", _live(browser), re.M), _live(browser)

    browser.send("Network.clearBrowserCookies")  # the session ends
    try:
        status = wait_for(
            lambda: _if(_status(browser), "Not updated since"),
            30,
            "the page to say the session is gone",
        )
        assert "the server answered 401" in status and "Sign in to Airflow" in status, status
    finally:
        browser.set_cookie(api_server.base, "_token", token)
    wait_for(lambda: _status(browser).startswith("Live: updated"), 30, "the page to recover")
    assert browser.evaluate("window.watching") == "this document"  # never reloaded


def test_a_browser_without_a_session_is_refused(browser, api_server, expanded_job):
    browser.send("Network.clearBrowserCookies")
    status = browser.open(_ui(api_server, f"/jobs/{expanded_job.job}"))
    text = browser.text()
    assert status == 401 and "Sign in to Airflow" in text
    assert expanded_job.topic not in text
