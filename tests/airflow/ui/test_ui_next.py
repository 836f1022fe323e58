"""The operator's next action - one decision (`_protocol.status.next_action`), two views: the job
page's top line and `samza-expand status`'s "next:" - and the page data for each case: job down, an
expansion waiting (the grace of a second expansion), a barrier blocked by lag, a barrier passed, all
well; the steps as Airflow ran them. Records written to a file store: no Kafka, no server."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ui_helpers import planned_record

from airflow_samza_expand._protocol.status.job_status import draining, read_status, render
from airflow_samza_expand._protocol.status.next_action import next_actions
from airflow_samza_expand.airflow._ui.airflow_tasks import dag_run_of
from airflow_samza_expand.airflow._ui.data import read_job
from airflow_samza_expand.airflow._ui.decode import expansion_of
from airflow_samza_expand.airflow._ui.html import job_content
from airflow_samza_expand.airflow._ui.records import TaskRun
from airflow_samza_expand.airflow._ui.settings import UiSettings
from airflow_samza_expand.airflow._ui.state_html import steps_table
from airflow_samza_expand.airflow._ui.views import snapshot_json
from airflow_samza_expand.core._clock import now_iso
from airflow_samza_expand.core._plan import plan_expansion
from airflow_samza_expand.core._record import ExpansionStatus
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._files import FileCoordinatorStore

JOB = "orders-job"
S = ExpansionStatus
IN_PLACE = {"restart": {"mode": "in-place", "requested": "auto", "reason": "every live one"}}


def _page(root: Path, status=None) -> tuple[str, dict]:
    """The job page's content and its JSON; `status`: the page's reads replaced (the lag)."""
    snap = read_job(UiSettings(coordinator=str(root), discover=False), JOB)
    if status is not None:
        snap.status = status(snap.status)
    return job_content(snap, "/samza-expand", ""), snapshot_json(snap)


def _top(page: str) -> tuple[str, str]:
    """(kind, sentence) of the page's top line."""
    found = re.search(
        r"<div id='next' class='[^']*' data-kind='([^']+)'>.*?<b>Next:</b> ([^<]+)", page
    )
    assert found is not None, page[:2000]
    return found.group(1), found.group(2).replace("&#x27;", "'").replace("&gt;", ">")


def _cli_next(store: FileCoordinatorStore, **kw) -> list[str]:
    lines = render(read_status(store, "files", **kw))
    return [line.removeprefix("  - ") for line in lines[lines.index("next:") + 1 :]]


def _advance(store, record, *steps):
    for status, step in steps:
        stamp = now_iso()
        record = store.put_expansion(
            record.advance(status).with_step(step, started_at=stamp, ended_at=now_iso()),
            expected_revision=record.revision,
        )
    return record


def _completed(store, v1, counts):
    """An expansion of `v1` to `counts`, completed with its barrier passed; returns v2."""
    record = store.put_expansion(planned_record(v1, counts), expected_revision=0)
    record = _advance(store, record, (S.EXPANDED, "expand"))
    record = store.put_expansion(
        record.advance(S.BARRIER_SNAPSHOT, barrier={"orders": {0: 10, 1: 12}}),
        expected_revision=record.revision,
    )
    steps = [(S.BARRIER_PASSED, "barrier"), (S.JOB_STOPPED, "stop"), (S.JOB_MODEL_WRITTEN,
             "write"), (S.SUBMITTED, "submit"), (S.COMPLETED, "ack")]  # fmt: skip
    _advance(store, record, *steps)
    before = dict(v1.partition_counts())
    return store.write_job_model(plan_expansion(v1, before, counts).new_job_model)


def _at_barrier(store, v1):
    """An expansion of `v1` to 4 partitions at its barrier snapshot."""
    record = store.put_expansion(planned_record(v1, {"orders": 4}), expected_revision=0)
    record = _advance(store, record, (S.EXPANDED, "expand"))
    return store.put_expansion(
        record.advance(S.BARRIER_SNAPSHOT, barrier={"orders": {0: 10, 1: 12}}),
        expected_revision=record.revision,
    )


def test_a_dead_job_is_the_top_line_of_the_page_and_of_the_cli(tmp_path):
    """The job exited after a completed expansion (its processor says failed): both views say
    to start it, first; the processors row says dead further down."""
    store = FileCoordinatorStore(str(tmp_path), JOB)
    v2 = _completed(store, store.write_job_model(JobModel.initial(JOB, {"orders": 2})),
                    {"orders": 4})  # fmt: skip
    store.heartbeat("proc-2", v2.version, "failed", ttl_s=30)
    page, doc = _page(tmp_path)
    want = f"no processor of job {JOB} runs: start the job (it reads job model v2)"
    assert _top(page) == ("job-down", want)
    assert _cli_next(store)[0] == want  # the same decision
    assert doc["next"][0] == {"kind": "job-down", "text": want, "urgent": True}
    assert page.index("id='next'") < page.index("Job model in force")  # at the top


def test_a_job_down_comes_before_the_expansion_it_blocks(tmp_path):
    store = FileCoordinatorStore(str(tmp_path), JOB)
    _at_barrier(store, store.write_job_model(JobModel.initial(JOB, {"orders": 2})))
    store.heartbeat("proc-1", 1, "failed", ttl_s=30)
    kinds = [a.kind for a in next_actions(read_status(store, "files"))]
    assert kinds == ["job-down", "waiting"]
    assert _top(_page(tmp_path)[0])[0] == "job-down"


def test_a_barrier_blocked_by_lag_names_the_partition_in_both_views(tmp_path):
    store = FileCoordinatorStore(str(tmp_path), JOB)
    v1 = store.write_job_model(JobModel.initial(JOB, {"orders": 2}))
    store.heartbeat("proc-1", 1, "running", ttl_s=30)
    record = _at_barrier(store, v1)
    assert draining(store.expansions()).expansion_id == record.expansion_id  # its lag is read
    lag = {"orders": {0: 0, 1: 15}}
    want = f"barrier of expansion {record.expansion_id} blocked by lag 15 on partition orders 1"
    cli = _cli_next(store, barrier_lag=lambda r, group: lag)
    assert cli[0].startswith(want + ": the job has not committed up to the barrier offset"), cli

    def lagging(status):
        return dataclasses.replace(status, barrier_lag=lag, barrier_of=record.expansion_id)

    assert _top(_page(tmp_path, lagging)[0]) == ("barrier-blocked", cli[0])
    drained = _cli_next(store, barrier_lag=lambda r, group: {"orders": {0: 0, 1: 0}})
    assert "it waits on the barrier step's next poll" in drained[0], drained


def test_a_passed_barrier_is_history_and_in_place_stops_nothing(tmp_path):
    """In place the barrier passes while the job's group still lags: the record alone says
    passed (no lag is read, nothing says waiting); the stop step stops nothing."""
    store = FileCoordinatorStore(str(tmp_path), JOB)
    v1 = store.write_job_model(JobModel.initial(JOB, {"orders": 2}))
    store.heartbeat("proc-1", 1, "running", ttl_s=30, capabilities=["in-place"])
    record = store.put_expansion(
        planned_record(v1, {"orders": 4}).with_result("plan", IN_PLACE), expected_revision=0
    )
    record = _advance(store, record, (S.EXPANDED, "expand"))
    record = store.put_expansion(
        record.advance(S.BARRIER_SNAPSHOT, barrier={"orders": {0: 10, 1: 12}}),
        expected_revision=record.revision,
    )
    assert draining(store.expansions()) is None  # in place: the job gates new partitions
    _advance(store, record, (S.BARRIER_PASSED, "barrier"))
    assert draining(store.expansions()) is None
    page, doc = _page(tmp_path)
    kind, text = _top(page)
    assert kind == "waiting" and text.endswith(
        "it waits on job model v2 being written (in-place: nothing stops)"
    ), text
    assert "Ordering barrier: passed at" in page and "waiting" not in page.split("Expansions")[1]
    assert "Ordering barrier of" not in page  # no current barrier with a lag
    assert "stops nothing (in-place restart)" in page  # the running section's next step
    assert doc["running"]["doing"] == "stops nothing (in-place restart)"
    assert doc["barrier"]["partitions"] == []


def test_a_second_expansions_grace_shows_the_first_barrier_as_history(tmp_path):
    store = FileCoordinatorStore(str(tmp_path), JOB)
    v2 = _completed(store, store.write_job_model(JobModel.initial(JOB, {"orders": 2})),
                    {"orders": 4})  # fmt: skip
    store.heartbeat("proc-2", 2, "running", ttl_s=30)
    ends = (datetime.now(UTC) + timedelta(seconds=120)).isoformat()
    second = store.put_expansion(planned_record(v2, {"orders": 8}), expected_revision=0)
    second = _advance(store, second, (S.EXPANDED, "expand"))
    store.put_expansion(
        second.with_result("grace", {"grace_s": 120.0, "ends_at": ends}),
        expected_revision=second.revision,
    )
    page, _ = _page(tmp_path)
    kind, text = _top(page)
    assert kind == "waiting" and second.expansion_id in text, text
    assert re.search(r"it waits on the producer refresh grace \(1[12]\d s left\), then the "
                     "barrier snapshot$", text), text  # fmt: skip
    history = page.split("<h2>Expansions</h2>")[1]
    assert history.count("Ordering barrier: passed at") == 1  # the first one's
    assert "Ordering barrier: not taken yet" in history  # the second's
    assert "Ordering barrier of" not in page
    assert _cli_next(store)[0] == text


def test_all_well_says_there_is_nothing_to_do(tmp_path):
    store = FileCoordinatorStore(str(tmp_path), JOB)
    store.write_job_model(JobModel.initial(JOB, {"orders": 2}))
    store.heartbeat("proc-1", 1, "running", ttl_s=30)
    kind, text = _top(_page(tmp_path)[0])
    assert kind == "well" and text.startswith(f"nothing to do: job {JOB} runs job model v1")
    assert _cli_next(store) == [text]


def test_the_steps_are_airflows_task_instances_linked_to_their_logs(tmp_path):
    """Airflow's durations; the protocol's own step time only where one task holds two of its
    steps (the barrier: grace and snapshot, drain), labelled; every task, submit_standby too."""
    v1 = JobModel.initial(JOB, {"orders": 2})
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    at = lambda s: (t0 + timedelta(seconds=s)).isoformat()  # noqa: E731
    record = (
        planned_record(v1, {"orders": 4}, owner="airflow:expand_orders/manual__1")
        .with_step("barrier_snapshot", started_at=at(10), ended_at=at(25))
        .with_step("barrier", started_at=at(25), ended_at=at(28.2))
    )
    assert dag_run_of(record.owner) == ("expand_orders", "manual__1")
    assert dag_run_of("cli:host/42") is None
    runs = [("plan", 0, 5.1), ("expand", 6, 1.0), ("submit_standby", 8, 2.2),
            ("barrier", 10, 19.4), ("stop_job", 30, 1.1)]  # fmt: skip
    tasks = tuple(
        TaskRun(
            task,
            "success",
            at(start),
            at(start + took),
            took,
            1,
            f"/dags/expand_orders/runs/manual__1/tasks/{task}",
        )  # fmt: skip
        for task, start, took in runs
    )
    expansion = dataclasses.replace(expansion_of(record.expansion_id, record), tasks=tasks)
    html = steps_table(expansion, "/airflow")
    rows = re.findall(r"<tr><td>(.*?)</td></tr>", html)
    assert len(rows) == len(runs)  # every task instance, in start order
    for (task, _, took), row in zip(runs, rows, strict=True):
        cells = row.split("</td><td>")
        link = f"<a href='/airflow/dags/expand_orders/runs/manual__1/tasks/{task}'"
        assert cells[0].startswith(link) and f">{task}</a>" in cells[0], cells[0]
        assert cells[4] == f"<span class='num'>{took:.1f} s</span>", cells
        protocol = cells[5]
        if task == "barrier":
            assert protocol == "protocol&#x27;s step time: grace and snapshot 15.0 s; drain 3.2 s"
        else:
            assert protocol == "", (task, protocol)
    assert "duration (Airflow)" in html
    without = steps_table(expansion_of(record.expansion_id, record), "/airflow")
    assert "step time (protocol&#x27;s record)" in without  # no DAG run here: labelled
