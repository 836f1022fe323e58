"""The protocol layer on real Kafka: conditional record updates keep every field when writers
race, the protocol imports no Airflow, and the steps are idempotent for one expansion."""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid

import pytest

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand._protocol import records
from airflow_samza_expand._protocol.ownership import cli_holder, give_up, lease_poll, take
from airflow_samza_expand._protocol.steps.expand import ExpandRequest, expand
from airflow_samza_expand._protocol.steps.plan.step import NOTHING, PlanRequest, plan
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

pytestmark = pytest.mark.kafka


def test_protocol_imports_no_airflow():
    probe = (
        "import sys, airflow_samza_expand._protocol.steps.plan.step, "
        "airflow_samza_expand._protocol.steps.expand, airflow_samza_expand._protocol.barrier.step, "
        "airflow_samza_expand._protocol.steps.stop, airflow_samza_expand._protocol.steps.standby, "
        "airflow_samza_expand._protocol.steps.write_model, "
        "airflow_samza_expand._protocol.steps.submit, airflow_samza_expand._protocol.steps.ack, "
        "airflow_samza_expand._protocol.steps.report, airflow_samza_expand._protocol.secrets, "
        "airflow_samza_expand._protocol.job.launch\n"
        "print(sorted(m for m in sys.modules if m == 'airflow' or m.startswith('airflow.')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_record_updated_concurrently_keeps_every_field(job):
    name, topic, store, admin, config = job
    holder = cli_holder()
    planned = plan(
        store, admin, PlanRequest(job_name=name, topics=(topic,), check_partitioner=False), holder
    )
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def writer(tag: str) -> None:
        own = KafkaCoordinatorStore(config, name)  # its own client, as another process would
        try:
            start.wait()
            for i in range(15):
                records.update(
                    own,
                    planned.expansion_id,
                    lambda r, key=f"{tag}-{i}": r.with_result(key, {"by": tag}),
                )
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            own.close()

    threads = [threading.Thread(target=writer, args=(t,)) for t in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    final = store.get_expansion(planned.expansion_id)
    written = {k for k in final.results if k[0] in "ab"}
    assert written == {f"{t}-{i}" for t in "ab" for i in range(15)}
    assert final.revision == 1 + 30
    assert "plan" in final.results  # the planner's field survived too


def test_expand_happens_at_most_once_per_intent(job):
    name, topic, store, admin, _ = job
    holder = cli_holder()
    outcome = plan(
        store, admin, PlanRequest(job_name=name, topics=(topic,), check_partitioner=False), holder
    )
    request = ExpandRequest(topic=topic, target=4)
    first = expand(admin, store, request, expansion_id=outcome.expansion_id)
    assert first["changed"] is True
    admin.create_partitions(topic, 8)  # someone grows it outside the expansion afterwards
    again = expand(admin, store, request, expansion_id=outcome.expansion_id)
    assert again["changed"] is False
    assert admin.partition_counts([topic]) == {topic: 8}  # not grown, not refused


def test_a_second_holder_waits_then_finds_nothing_left(job):
    name, topic, store, admin, _ = job
    request = PlanRequest(job_name=name, topics=(topic,), check_partitioner=False)
    first = plan(store, admin, request, "cli:a/1")
    from airflow_samza_expand.core.errors import LeaseHeldError

    with pytest.raises(LeaseHeldError, match="cli:a/1"):
        plan(store, admin, request, "cli:b/2")
    wait = lease_poll(store, "cli:b/2")
    assert not wait.free and wait.holder == "cli:a/1"
    assert wait.expansion_id == first.expansion_id
    lease = take(store, "cli:a/1")
    for status in ("expanded", "barrier-passed", "job-stopped", "job-model-written", "completed"):
        records.update(store, first.expansion_id, lambda r, s=status: r.advance(s), fence=lease)
    give_up(store, "cli:a/1")
    assert lease_poll(store, "cli:b/2").free
    joined = plan(store, admin, request, "cli:b/2", joined_holder="cli:a/1")
    assert joined.kind == NOTHING and joined.expansion_id == first.expansion_id
    assert "cli:a/1" in joined.message


def test_dry_run_plan_writes_nothing_and_takes_no_lease(job):
    name, topic, store, admin, _ = job
    request = PlanRequest(job_name=name, topics=(topic,), check_partitioner=False, dry_run=True)
    outcome = plan(store, admin, request, cli_holder())
    assert outcome.plan["counts_after"] == {topic: 4}
    assert store.expansions() == [] and store.get_lease("expansion") is None


@pytest.mark.parametrize("name", ["password-resets", "user.tokens", "client_secrets"])
def test_a_topic_named_like_a_secret_is_no_secret(kafka_bootstrap, unique_topic, name):
    """Topic names are keys of the record's maps (counts, barrier offsets, scan positions):
    a topic called ``password-resets`` is expanded like any other, its counts kept."""
    from airflow_samza_expand._protocol.barrier import step as barrier

    config = client_config(kafka_bootstrap)
    job_name = f"job-{uuid.uuid4().hex[:10]}"
    topic = unique_topic(name)
    with (
        KafkaAdmin(config, timeout_s=15) as admin,
        KafkaCoordinatorStore(config, job_name) as store,
    ):
        admin.ensure_topic(topic, 2)
        store.write_job_model(JobModel.initial(job_name, {topic: 2}))
        holder = cli_holder()
        request = PlanRequest(job_name=job_name, topics=(topic,), check_partitioner=False)
        planned = plan(store, admin, request, holder)
        expand(
            admin, store, ExpandRequest(topic=topic, target=4), expansion_id=planned.expansion_id
        )
        snapshot = barrier.snapshot_poll(
            admin, store, expansion_id=planned.expansion_id, group=job_name, grace_ends=0.0,
            stale_quiet_s=0.0,
        )  # fmt: skip
        assert snapshot.done, snapshot.message
        record = store.get_expansion(planned.expansion_id)
        assert record.plan["counts_before"] == {topic: 2}
        assert record.barrier == {topic: {0: 0, 1: 0}}


def _ui_shows_every_step_timed(store, record, tmp_path) -> None:
    """The job page's expansion table (a file store holding the same models and record): a
    start, an end and a duration in every step's row."""
    import re

    from airflow_samza_expand.airflow._ui.data import read_job
    from airflow_samza_expand.airflow._ui.html import job_page
    from airflow_samza_expand.airflow._ui.settings import UiSettings
    from airflow_samza_expand.store._files import FileCoordinatorStore

    files = FileCoordinatorStore(str(tmp_path / "ui"), store.job_name)
    for model in store.job_model_history():
        files.write_job_model(model)
    files.put_expansion(record, expected_revision=0)
    page = job_page(read_job(UiSettings(coordinator=str(tmp_path / "ui"), discover=False),
                             store.job_name), "/samza-expand", "")  # fmt: skip
    from airflow_samza_expand._protocol.steps import step_title

    for step in record.steps:  # named by the DAG's task ids
        row = re.search(rf"<tr><td>{re.escape(step_title(step))}</td>(.*?)</tr>", page)
        assert row is not None, step
        # start, end, the record's step time, then what the step did under the chosen restart
        cells = re.findall(r"<td>(.*?)</td>", row.group(1))
        assert len(cells) == 4 and "-" not in (cells[0], cells[1]), (step, cells)
        assert re.search(r"\d+(\.\d+)? s", cells[2]), (step, cells)


def test_a_completed_expansion_has_a_start_and_an_end_for_every_step(job, tmp_path):
    """Each step's first call records its start (`records.begin`), its last its end: the UI's
    expansion table shows start, end and duration of every step of a completed expansion."""
    from airflow_samza_expand._protocol.barrier import step as barrier_step
    from airflow_samza_expand._protocol.steps import ack as ack_step
    from airflow_samza_expand._protocol.steps import report as report_step
    from airflow_samza_expand._protocol.steps import stop as stop_step
    from airflow_samza_expand._protocol.steps import submit as submit_step
    from airflow_samza_expand._protocol.steps import write_model as write_step

    name, topic, store, admin, _ = job
    holder = cli_holder()
    planned = plan(
        store, admin, PlanRequest(job_name=name, topics=(topic,), check_partitioner=False), holder
    )
    eid = planned.expansion_id
    lease = take(store, holder)
    expand(admin, store, ExpandRequest(topic=topic, target=4), expansion_id=eid, lease=lease)
    barrier = barrier_step.barrier_poll(
        admin, store, expansion_id=eid, group=name, grace_ends=0.0, lease=lease,
        stale_quiet_s=0.0,
    )  # fmt: skip
    assert barrier.done, barrier.message
    stop = stop_step.request_stop(store, "test", expansion_id=eid)
    assert not stop.requested  # no processor runs: nothing to stop
    stop_step.record_stopped(store, eid, {"requested": False}, lease)
    written = write_step.write_job_model(admin, store, holder, expansion_id=eid, lease=lease)
    assert written["version"] == 2
    assert submit_step.before_submit(store, eid, continuous=True).launch
    submit_step.record_submitted(store, eid, {"pid": 1}, lease)
    assert not ack_step.ack_poll(store, 2, expansion_id=eid, lease=lease).done
    store.heartbeat("proc-1", 2, "running", role="active", ttl_s=30)
    ack = ack_step.ack_poll(store, 2, expansion_id=eid, lease=lease)
    assert ack.done, ack.message
    ack_step.record_ack(store, eid, ack.result, lease)
    records.begin(store, eid, "report", fence=lease)
    report_step.complete(store, eid, {"seconds_per_step": {}}, lease)

    record = store.get_expansion(eid)
    assert record.status == "completed"
    steps = ("plan", "expand", "barrier_snapshot", "barrier", "stop", "write", "submit", "ack")
    assert set(record.steps) == {*steps, "report"}
    for step, times in record.steps.items():
        assert times.started_at and times.ended_at, (step, times)
        assert times.started_at <= times.ended_at, (step, times)
    _ui_shows_every_step_timed(store, record, tmp_path)
    # a rerun of a step keeps the start of its first call
    before = record.steps["expand"]
    expand(admin, store, ExpandRequest(topic=topic, target=4), expansion_id=eid, lease=lease)
    assert store.get_expansion(eid).steps["expand"].started_at == before.started_at


def test_the_report_formats_offsets_for_people():
    """Offsets as ``topic pN offset``, partitions in number order, no dict."""
    from airflow_samza_expand._protocol.steps.report import offsets_text

    offsets = {"orders": {"10": 5, "2": 4723, "0": 1}, "a": {"0": 9}}
    assert offsets_text(offsets) == "a p0 9; orders p0 1, p2 4723, p10 5"
    assert offsets_text({}) == "none"
