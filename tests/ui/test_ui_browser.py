"""The plugin's pages in a real headless Chromium, after a real expansion (tests/ui/conftest.py).

Screenshots go to the session's ``ui-screenshots`` directory under pytest's base temp dir
(printed at the end of the test; docs/ui/*.png are copies of them).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from browser import Browser, chromium_binary, wait_for
from ui_helpers import http

pytestmark = pytest.mark.kafka

# steps of the expansion record: (legacy dict record name, typed record name) - either shows
STEPS = (("plan",), ("expand",), ("barrier_drain", "barrier"), ("write_job_model", "write"))
FRAME_TEXT = (
    "(() => { const f = document.querySelector('iframe');"
    " return f && f.contentDocument && f.contentDocument.body"
    " ? f.contentDocument.body.innerText : ''; })()"
)


@pytest.fixture(scope="module")
def browser(api_server, token) -> Iterator[Browser]:
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no Chromium: run scripts/setup.sh as root (apt-get install chromium)")
    with Browser(binary) as chromium:
        chromium.set_cookie(api_server.base, "_token", token)  # the UI's session cookie
        yield chromium


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
    for step in STEPS:  # each step row: its name, then its times
        assert any(f"\n{name}\t" in text for name in step), step
    assert "holds" in text  # the barrier: every old partition committed
    assert "processor-v1\t-\tstopped\t1" in text and "dead" in text
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
    assert f"Expansion under way: {waiting_job.expansion_id}" in text
    assert "Step barrier (running) for" in text and f"{waiting_job.topic} 1\t" in text
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
    from airflow_samza_expand.store.kafka import KafkaCoordinatorStore

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


def test_a_browser_without_a_session_is_refused(browser, api_server, expanded_job):
    browser.send("Network.clearBrowserCookies")
    status = browser.open(_ui(api_server, f"/jobs/{expanded_job.job}"))
    text = browser.text()
    assert status == 401 and "Sign in to Airflow" in text
    assert expanded_job.topic not in text
