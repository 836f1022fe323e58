"""The plugin's JSON API and refusals, against a real api-server (HTTP, no browser)."""

from __future__ import annotations

import html
import json
import re
from urllib.parse import quote

import pytest
from ui_helpers import http

pytestmark = pytest.mark.kafka


def test_plugin_is_listed_by_the_api_server(api_server, token):
    status, body = http("GET", f"{api_server.base}/api/v2/plugins", token=token)
    assert status == 200, body
    plugin = next(p for p in json.loads(body)["plugins"] if p["name"] == "samza_expand")
    assert plugin["fastapi_apps"][0]["url_prefix"] == "/samza-expand"
    assert plugin["external_views"][0]["url_route"] == "expansions"


@pytest.mark.parametrize("path", ["/samza-expand/", "/samza-expand/api/jobs"])
def test_unauthenticated_requests_are_refused(api_server, path):
    status, body = http("GET", f"{api_server.base}{path}")
    assert status == 401, body
    if "/api/" in path:  # the documented error document, as every other fault
        doc = json.loads(body)
        assert set(doc) == {"error", "detail"} and "sign in to Airflow" in doc["detail"], doc
    status, body = http("GET", f"{api_server.base}{path}", token="not-a-jwt")
    assert status in (401, 403), body
    assert "ui-job-" not in body


def test_api_job_has_versions_mapping_and_steps(api_server, token, expanded_job):
    status, body = http(
        "GET", f"{api_server.base}/samza-expand/api/jobs/{expanded_job.job}", token=token
    )
    assert status == 200, body
    doc = json.loads(body)
    assert [m["version"] for m in doc["history"]] == [2, 1]
    assert doc["job_model"]["partition_counts"] == {expanded_job.topic: 4}
    tasks = {r["partition"]: r["task"] for r in doc["job_model"]["mapping"]}
    assert tasks == {0: "Partition 0", 1: "Partition 1", 2: "Partition 0", 3: "Partition 1"}
    assert doc["problems"] == [], doc["problems"]
    (expansion,) = doc["expansions"]
    assert expansion["expansion_id"] == expanded_job.expansion_id
    steps = {s["name"]: s for s in expansion["steps"]}
    write = steps.get("write_job_model") or steps["write"]  # legacy or typed record name
    assert steps["expand"]["ended_at"] and write["ended_at"]
    # a completed expansion's barrier is history: passed, from its record; no current lag
    assert expansion["barrier_passed_at"] and doc["barrier"]["partitions"] == []
    # the steps as Airflow ran them: every task instance of the run, Airflow's durations
    tasks = {t["task_id"]: t for t in expansion["tasks"]}
    assert set(tasks) == {"plan", "expand", "barrier", "stop", "write", "report"}, tasks
    for task, run in tasks.items():
        assert run["state"] == "success" and run["duration_s"] is not None, run
        assert (
            run["log_path"]
            == f"/dags/{expanded_job.dag_id}/runs/"
            + quote(expanded_job.run_id, safe="")
            + f"/tasks/{task}"
        )
    assert doc["next"][0]["kind"] == "well", doc["next"]
    states = {p["processor_id"]: (p["state"], p["alive"]) for p in doc["processors"]}
    assert states == {"processor-v1": ("stopped", False), "processor-v2": ("running", True)}
    assert "restarted job: batch 4 committed" in doc["log"]["text"]
    assert doc["running"] is None, doc["running"]  # the expansion completed
    assert doc["problems"] == [], doc["problems"]


def test_api_diff_between_versions(api_server, token, expanded_job):
    url = f"{api_server.base}/samza-expand/api/jobs/{expanded_job.job}/diff?a=1&b=2"
    status, body = http("GET", url, token=token)
    assert status == 200, body
    diff = json.loads(body)
    assert diff["counts"] == [{"stream": expanded_job.topic, "a": 2, "b": 4}]
    assert {(r["ssp"], r["change"], r["task_b"]) for r in diff["ssps"]} == {
        (f"[kafka, {expanded_job.topic}, 2]", "added", "Partition 0"),
        (f"[kafka, {expanded_job.topic}, 3]", "added", "Partition 1"),
    }


def test_unknown_job_and_version_are_404_messages(api_server, token, expanded_job):
    status, body = http("GET", f"{api_server.base}/samza-expand/api/jobs/no-such-job", token=token)
    assert status == 404, body
    assert "no job model" in json.loads(body)["detail"]
    status, body = http("GET", f"{api_server.base}/samza-expand/jobs/no-such-job", token=token)
    assert status == 404 and "Unknown job" in body and "Traceback" not in body
    url = f"{api_server.base}/samza-expand/api/jobs/{expanded_job.job}/diff?a=1&b=9"
    status, body = http("GET", url, token=token)
    assert status == 404 and "has no job model v9 (it has v1, v2)" in body


def test_api_typed_record_barrier_lag_and_lease(api_server, token, waiting_job):
    status, body = http(
        "GET", f"{api_server.base}/samza-expand/api/jobs/{waiting_job.job}", token=token
    )
    assert status == 200, body
    doc = json.loads(body)
    assert doc["problems"] == [], doc["problems"]
    (expansion,) = doc["expansions"]
    assert expansion["status"] == "barrier-snapshot"
    assert expansion["owner"] == waiting_job.holder
    assert [s["name"] for s in expansion["steps"]] == ["plan", "expand", "barrier (drain)"]
    assert [s["record_step"] for s in expansion["steps"]] == ["plan", "expand", "barrier"]
    assert expansion["steps"][2]["ended_at"] is None  # the barrier still waits
    lag = {r["partition"]: r["lag"] for r in doc["barrier"]["partitions"]}
    assert lag == {0: 0, 1: 7}
    want = f"barrier of expansion {waiting_job.expansion_id} blocked by lag 7 on partition "
    assert doc["next"][0]["kind"] == "barrier-blocked", doc["next"]
    assert doc["next"][0]["text"].startswith(want + f"{waiting_job.topic} 1: "), doc["next"]
    running = doc["running"]  # the expansion under way: its open step and lag per old partition
    assert (running["expansion_id"], running["step"]) == (
        waiting_job.expansion_id,
        "barrier (drain)",
    )
    assert running["record_step"] == "barrier"  # the record keeps its own key
    assert {r["partition"]: r["lag"] for r in running["barrier"]} == {0: 0, 1: 7}
    assert doc["live_partition_counts"] == {waiting_job.topic: 4}
    (lease,) = doc["leases"]
    assert (lease["name"], lease["holder"], lease["expired"]) == (
        "expansion",
        waiting_job.holder,
        False,
    )


def test_api_jobs_lists_configured_and_discovered_jobs(
    api_server, token, expanded_job, waiting_job, ui_kafka
):
    from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

    phantom = f"{waiting_job.job}-phantom"  # a coordinator topic holding a lease, no job model
    with KafkaCoordinatorStore(ui_kafka, phantom) as store:  # (an older plan of a typo left it)
        store.release_lease(store.acquire_lease("expansion", "airflow:old/run", ttl_s=1))
    status, body = http("GET", f"{api_server.base}/samza-expand/api/jobs", token=token)
    assert status == 200, body
    doc = json.loads(body)
    sources = {j["name"]: j["sources"] for j in doc["jobs"]}
    assert sources[expanded_job.job] == ["configured", "coordinator topic"]
    assert sources[waiting_job.job] == ["coordinator topic"]  # found by its topic only
    assert phantom not in sources  # no job model: no job
    assert doc["problems"] == []
    # its page names the close job that exists and how a new job gets v1
    status, body = http("GET", f"{api_server.base}/samza-expand/api/jobs/{phantom}", token=token)
    assert status == 404, body
    detail = json.loads(body)["detail"]
    assert f"Did you mean {waiting_job.job!r}?" in detail and "samza-expand init-job" in detail


@pytest.mark.parametrize("path", ["/samza-expand/openapi.json", "/samza-expand/docs"])
def test_the_apps_openapi_and_docs_need_a_session_and_work_offline(api_server, token, path):
    url = f"{api_server.base}{path}"
    assert http("GET", url)[0] == 401
    assert http("GET", url, token="not-a-jwt")[0] in (401, 403)
    status, body = http("GET", url, token=token)
    assert status == 200, body
    assert "cdn." not in body and "<script" not in body  # nothing loads from elsewhere
    assert "/api/jobs/{job}/diff" in body


def test_the_401_page_links_to_airflows_sign_in(api_server, expanded_job):
    status, body = http("GET", f"{api_server.base}/samza-expand/jobs/{expanded_job.job}")
    assert status == 401
    assert ">All jobs<" not in body  # it would be another 401
    (href,) = re.findall(r"href='([^']*/api/v2/auth/login\?next=[^']*)'", body)
    status, login = http("GET", f"{api_server.base}{html.unescape(href)}")  # follows redirects
    assert status == 200 and "Invalid or unsafe" not in login, login


@pytest.mark.parametrize(
    ("path", "named"),
    [
        ("jobs/{job}/diff?a=x&b=2", "a"),
        ("jobs/{job}/diff", "a"),
        ("api/jobs/{job}/diff?a=1&b=y", "b"),
        ("api/jobs/{job}/diff?a=1", "b"),
        ("api/jobs/{job}/models/abc", "version"),
        ("api/jobs/{job}/models/1.5", "version"),
    ],
)
def test_bad_parameters_are_bad_input_not_raw_422(api_server, token, expanded_job, path, named):
    url = f"{api_server.base}/samza-expand/{path.format(job=expanded_job.job)}"
    status, body = http("GET", url, token=token)
    assert status == 400, body
    assert "int_parsing" not in body
    if path.startswith("api/"):
        doc = json.loads(body)
        assert set(doc) == {"error", "detail"} and doc["error"] == "Bad input"
        assert f"parameter {named}" in doc["detail"]
    else:
        assert "Bad input" in body and "Traceback" not in body and "{&quot;" not in body
        assert f"parameter {named}" in body
