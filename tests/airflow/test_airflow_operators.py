"""Operators against Kafka: happy path, idempotent rerun, every refusal of docs/design.md
'Refusals'."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest
from airflow.sdk.exceptions import AirflowFailException
from airflow_env import task_context
from kafka_helpers import produce_keyed

from airflow_samza_expand._kafka.admin import KafkaUnavailableError
from airflow_samza_expand.airflow.operators import (
    ExpandPartitionsOperator,
    PlanExpansionOperator,
    StopStatefulJobOperator,
    WriteJobModelOperator,
)
from airflow_samza_expand.airflow.operators._stop import StopTimeoutError
from airflow_samza_expand.core.model import SystemStreamPartition

pytestmark = pytest.mark.kafka


def _plan(job, **kwargs):
    kwargs.setdefault("targets", {job.topic: 4})
    return PlanExpansionOperator(task_id="plan", job_name=job.name, **kwargs)


# -- PlanExpansionOperator ---------------------------------------------------------------------


def test_plan_records_the_expansion_and_a_rerun_reuses_it(job):
    j = job(2)
    produce_keyed(j.config, j.topic, 200)

    first = _plan(j).execute(task_context("plan"))

    assert first["reused"] is False
    assert first["plan"]["counts_before"] == {j.topic: 2}
    assert first["plan"]["counts_after"] == {j.topic: 4}
    assert first["plan"]["new_version"] == 2
    assert first["conformance"][j.topic]["partitioner"] == "crc32"
    assert first["lag"]["total"] == 200  # nothing committed yet: everything is lag
    record = j.store.get_expansion(first["expansion_id"])
    assert record.status == "planned" and record.owner == "airflow:expansion_test/manual__test"
    assert record.plan["counts_before"] == {j.topic: 2}

    again = _plan(j).execute(task_context("plan"))
    assert again["reused"] is True
    assert again["expansion_id"] == first["expansion_id"]
    assert again["plan"] == first["plan"]


def test_plan_with_factor_doubles_the_model_count(job):
    j = job(2)
    result = PlanExpansionOperator(
        task_id="plan", job_name=j.name, topics=j.topic, factor=4
    ).execute(task_context())
    assert result["plan"]["counts_after"] == {j.topic: 8}


@pytest.mark.parametrize(
    ("target", "message"),
    [(1, "cannot shrink"), (2, "2"), (6, "power of two")],
    ids=["shrink", "same-count", "non-power-of-two"],
)
def test_plan_refuses_bad_growth_and_writes_nothing(job, target, message):
    j = job(2)
    with pytest.raises(AirflowFailException, match="InvalidGrowthError") as refused:
        _plan(j, targets={j.topic: target}).execute(task_context())
    assert message in str(refused.value)
    assert j.store.get_expansion(f"{j.name}~{j.topic}.2-{target}") is None


def test_plan_refuses_an_unknown_topic(job):
    j = job(2)
    with pytest.raises(AirflowFailException, match="UnknownTopicError.*no-such-topic"):
        _plan(j, targets={"no-such-topic": 4}).execute(task_context())


def test_plan_refuses_a_topic_written_with_a_custom_partitioner(job):
    j = job(4)
    produce_keyed(j.config, j.topic, 100, partition_count=4, misplace=True)
    with pytest.raises(AirflowFailException, match="PartitionerMismatchError") as refused:
        _plan(j, targets={j.topic: 8}).execute(task_context())
    assert "key 'key-" in str(refused.value)  # names offending records
    assert j.store.get_expansion(f"{j.name}~{j.topic}.4-8") is None


def test_plan_refuses_a_job_without_job_model(job):
    j = job(2, write_model=False)
    with pytest.raises(AirflowFailException, match="no job model"):
        _plan(j).execute(task_context())


# -- ExpandPartitionsOperator ------------------------------------------------------------------


def test_expand_grows_the_topic_and_a_rerun_changes_nothing(job, admin):
    j = job(2)
    op = ExpandPartitionsOperator(task_id="expand", topic=j.topic, target_partitions=4)

    first = op.execute(task_context())
    assert first["changed"] is True
    assert admin.partition_counts([j.topic])[j.topic] == 4

    again = op.execute(task_context())
    assert again["changed"] is False
    assert again["partitions_after"] == 4
    assert admin.partition_counts([j.topic])[j.topic] == 4


def test_expand_by_factor_uses_the_planned_baseline_on_rerun(job, admin):
    j = job(2)
    plan = _plan(j, targets={j.topic: 8}).execute(task_context())
    op = ExpandPartitionsOperator(
        task_id="expand",
        topic=j.topic,
        factor=4,
        job_name=j.name,
        expansion_id=plan["expansion_id"],
    )
    assert op.execute(task_context())["partitions_after"] == 8
    assert op.execute(task_context())["changed"] is False  # not 8 * 4
    assert admin.partition_counts([j.topic])[j.topic] == 8
    record = j.store.get_expansion(plan["expansion_id"])
    assert record.status == "expanded" and record.steps["expand"].ended_at


def test_expand_factor_baseline_is_the_job_model(job, admin):
    j = job(2)
    op = ExpandPartitionsOperator(task_id="expand", topic=j.topic, factor=2, job_name=j.name)
    assert op.execute(task_context())["changed"] is True
    assert op.execute(task_context())["changed"] is False
    assert admin.partition_counts([j.topic])[j.topic] == 4


@pytest.mark.parametrize(
    ("target", "message"),
    [(1, "shrink"), (6, "power of two"), (3, "not a multiple")],
    ids=["shrink", "non-power-of-two", "non-multiple"],
)
def test_expand_refuses_bad_growth_and_changes_nothing(job, admin, target, message):
    j = job(2)
    op = ExpandPartitionsOperator(task_id="expand", topic=j.topic, target_partitions=target)
    with pytest.raises(AirflowFailException, match=message):
        op.execute(task_context())
    assert admin.partition_counts([j.topic])[j.topic] == 2


def test_expand_without_power_of_two_requirement_allows_any_multiple(job, admin):
    j = job(2)
    op = ExpandPartitionsOperator(
        task_id="expand", topic=j.topic, target_partitions=6, require_power_of_two=False
    )
    assert op.execute(task_context())["changed"] is True
    assert admin.partition_counts([j.topic])[j.topic] == 6


def test_expand_refuses_a_topic_at_an_unexpected_count(job, admin):
    j = job(2)
    admin.create_partitions(j.topic, 4)  # grown outside the expansion; job model still says 2
    op = ExpandPartitionsOperator(
        task_id="expand", topic=j.topic, target_partitions=8, job_name=j.name
    )
    with pytest.raises(AirflowFailException, match="has 4 partitions.*from 2"):
        op.execute(task_context())
    assert admin.partition_counts([j.topic])[j.topic] == 4


def test_expand_refuses_an_unknown_topic(kafka_conn, unique_topic):
    op = ExpandPartitionsOperator(task_id="expand", topic=unique_topic("nope"), factor=2)
    with pytest.raises(AirflowFailException, match="UnknownTopicError"):
        op.execute(task_context())


def test_expand_dry_run_validates_without_applying(job, admin):
    j = job(2)
    op = ExpandPartitionsOperator(task_id="expand", topic=j.topic, factor=2, dry_run=True)
    result = op.execute(task_context())
    assert result["dry_run"] is True and result["changed"] is False
    assert admin.partition_counts([j.topic])[j.topic] == 2


def test_expand_rejects_ambiguous_arguments():
    with pytest.raises(ValueError, match="exactly one of factor"):
        ExpandPartitionsOperator(task_id="x", topic="t", factor=2, target_partitions=4)


def test_expand_applied_then_timed_out_succeeds_by_rereading_the_count(job, admin, dev_broker):
    j = job(2)
    dev_broker.faults.inject("CreatePartitions", "apply_then_timeout", times=1)
    op = ExpandPartitionsOperator(
        task_id="expand", topic=j.topic, target_partitions=4, request_timeout_s=2
    )
    result = op.execute(task_context())
    assert dev_broker.faults.hits("CreatePartitions") == 1
    assert result["changed"] is True
    assert admin.partition_counts([j.topic])[j.topic] == 4
    # Airflow's retry (or a rerun) finds the target: success without change.
    assert op.execute(task_context())["changed"] is False


def test_expand_timeout_not_applied_is_retryable_and_the_retry_succeeds(job, admin, dev_broker):
    j = job(2)
    dev_broker.faults.inject("CreatePartitions", "error", error="REQUEST_TIMED_OUT", times=1)
    op = ExpandPartitionsOperator(
        task_id="expand", topic=j.topic, target_partitions=4, request_timeout_s=5
    )
    with pytest.raises(KafkaUnavailableError):  # not AirflowFailException: Airflow retries
        op.execute(task_context())
    assert admin.partition_counts([j.topic])[j.topic] == 2
    assert op.execute(task_context())["changed"] is True  # the retry
    assert admin.partition_counts([j.topic])[j.topic] == 4


def test_expand_racing_with_a_concurrent_retry_both_succeed(job, admin, dev_broker):
    """Both requests reach the broker while the topic has 2 partitions; the second is refused
    (INVALID_PARTITIONS: already 4). Re-reading the count turns that into success."""
    j = job(2)
    dev_broker.faults.inject("CreatePartitions", "delay", delay_s=1.0, times=2)
    outcomes: list[object] = []
    start = threading.Barrier(2)

    def expand() -> None:
        op = ExpandPartitionsOperator(task_id="expand", topic=j.topic, target_partitions=4)
        start.wait()
        try:
            outcomes.append(op.execute(task_context()))
        except Exception as exc:  # noqa: BLE001 - recorded for the assertion
            outcomes.append(exc)

    threads = [threading.Thread(target=expand) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert dev_broker.faults.hits("CreatePartitions") == 2
    assert all(isinstance(o, dict) for o in outcomes), outcomes
    assert admin.partition_counts([j.topic])[j.topic] == 4


def test_operators_fail_retryably_when_the_broker_drops_metadata(job, dev_broker):
    j = job(2)
    dev_broker.faults.inject("Metadata", "drop_connection", times=None)
    op = ExpandPartitionsOperator(
        task_id="expand", topic=j.topic, target_partitions=4, request_timeout_s=2
    )
    try:
        with pytest.raises(KafkaUnavailableError):
            op.execute(task_context())
    finally:
        dev_broker.faults.clear()
    assert op.execute(task_context())["changed"] is True


# -- StopStatefulJobOperator -------------------------------------------------------------------


def test_stop_with_nothing_running_is_a_no_op(job):
    j = job(2)
    j.store.heartbeat("old-processor", 1, "stopped")
    result = StopStatefulJobOperator(task_id="stop", job_name=j.name).execute(task_context())
    assert result["requested"] is False
    assert j.store.stop_request() is None


def test_stop_requests_the_running_version_and_waits_for_processors(job):
    j = job(2)
    j.store.heartbeat("p-1", 1, "running")
    j.store.heartbeat("p-2", 1, "running")

    def the_job() -> None:  # processors react to the control record as the Spark job does
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            request = j.store.stop_request()
            if request and request["version"] == 1:
                j.store.heartbeat("p-1", 1, "stopped")
                time.sleep(1.0)
                j.store.heartbeat("p-2", 1, "stopped")
                return
            time.sleep(0.2)

    worker = threading.Thread(target=the_job)
    worker.start()
    op = StopStatefulJobOperator(
        task_id="stop", job_name=j.name, poll_interval_s=0.3, stop_timeout_s=30
    )
    try:
        result = op.execute(task_context())
    finally:
        worker.join()
    assert result["requested"] is True
    assert result["stopped"] == ["p-1", "p-2"]
    assert j.store.stop_request()["version"] == 1
    assert j.store.processors()["p-2"]["state"] == "stopped"
    # A rerun finds nothing running.
    assert op.execute(task_context())["requested"] is False


def test_stop_times_out_retryably(job):
    j = job(2)
    j.store.heartbeat("stuck", 1, "running")
    op = StopStatefulJobOperator(
        task_id="stop", job_name=j.name, poll_interval_s=0.2, stop_timeout_s=1
    )
    with pytest.raises(StopTimeoutError, match="stuck"):
        op.execute(task_context())


# -- WriteJobModelOperator ---------------------------------------------------------------------


def test_write_job_model_maps_new_partitions_to_fixed_tasks(job, admin):
    j = job(2)
    admin.create_partitions(j.topic, 4)
    op = WriteJobModelOperator(task_id="write", job_name=j.name)

    result = op.execute(task_context("write"))

    assert result["written"] is True and result["version"] == 2
    model = j.store.latest_job_model()
    assert model.partition_counts() == {j.topic: 4}
    assert model.created_by == "airflow:expansion_test/manual__test"
    tasks = {t: sorted(s.partition for s in ssps) for t, ssps in model.task_to_ssps().items()}
    assert tasks == {"Partition 0": [0, 2], "Partition 1": [1, 3]}
    assert model.ssp_to_task[SystemStreamPartition("kafka", j.topic, 3)] == "Partition 1"

    again = op.execute(task_context("write"))
    assert again["written"] is False and again["version"] == 2
    assert len(j.store.job_model_history()) == 2


def test_write_job_model_with_an_expansion_reruns_as_no_op(job):
    j = job(2)
    plan = _plan(j).execute(task_context("plan"))
    ExpandPartitionsOperator(
        task_id="expand",
        topic=j.topic,
        factor=2,
        job_name=j.name,
        expansion_id=plan["expansion_id"],
    ).execute(task_context("expand"))
    op = WriteJobModelOperator(task_id="write", job_name=j.name, expansion_id=plan["expansion_id"])
    with pytest.raises(AirflowFailException, match="'expanded', which cannot become"):
        op.execute(task_context("write"))  # the barrier and the stop have not ended
    assert j.store.latest_job_model().version == 1  # refused before writing
    _barrier_passed_and_job_stopped(j.store, plan["expansion_id"])

    assert op.execute(task_context("write"))["written"] is True
    assert op.execute(task_context("write"))["written"] is False
    record = j.store.get_expansion(plan["expansion_id"])
    assert record.results["write"]["version"] == 2 and record.status == "job-model-written"
    assert j.store.latest_job_model().task_to_ssps() == plan_model_tasks(plan)


def _barrier_passed_and_job_stopped(store, expansion_id: str) -> None:
    """The record as the barrier and stop steps leave it (their own tests run them)."""
    from airflow_samza_expand._protocol import records
    from airflow_samza_expand.core._record import ExpansionStatus as S

    for status in (S.BARRIER_PASSED, S.JOB_STOPPED):
        records.update(store, expansion_id, lambda r, s=status: r.advance(s))


def plan_model_tasks(plan):
    from airflow_samza_expand.core.model import JobModel

    return JobModel.from_dict(plan["plan"]["new_job_model"]).task_to_ssps()


def test_write_job_model_refuses_before_the_topic_grew(job):
    j = job(2)
    plan = _plan(j).execute(task_context("plan"))
    op = WriteJobModelOperator(task_id="write", job_name=j.name, expansion_id=plan["expansion_id"])
    with pytest.raises(AirflowFailException, match="run ExpandPartitionsOperator first"):
        op.execute(task_context("write"))
    assert j.store.latest_job_model().version == 1


def test_write_job_model_names_another_writer_of_the_planned_version(job, admin):
    j = job(2)
    plan = _plan(j).execute(task_context("plan"))
    admin.create_partitions(j.topic, 4)
    WriteJobModelOperator(task_id="write", job_name=j.name).execute(
        task_context("write", dag_id="other_dag")
    )
    op = WriteJobModelOperator(task_id="write", job_name=j.name, expansion_id=plan["expansion_id"])
    with pytest.raises(AirflowFailException, match="airflow:other_dag/manual__test"):
        op.execute(task_context("write"))
    assert j.store.latest_job_model().created_by == "airflow:other_dag/manual__test"


def test_two_writers_racing_for_the_next_version_one_wins_the_other_fails(job, admin, monkeypatch):
    """Both writers reach ``write_job_model`` together (a barrier inside a spy on the store's
    write proves it), so the race really happens: one wins, the other fails naming it."""
    from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

    j = job(2)
    admin.create_partitions(j.topic, 4)
    outcomes: dict[str, object] = {}
    at_write = threading.Barrier(2, timeout=60)
    real_write = KafkaCoordinatorStore.write_job_model

    def write_together(self, model):
        at_write.wait()  # both contenders have read v1 and built their v2
        return real_write(self, model)

    monkeypatch.setattr(KafkaCoordinatorStore, "write_job_model", write_together)

    def write(dag_id: str) -> None:
        op = WriteJobModelOperator(task_id="write", job_name=j.name)
        try:
            outcomes[dag_id] = op.execute(task_context("write", dag_id=dag_id))
        except AirflowFailException as exc:
            outcomes[dag_id] = exc

    threads = [threading.Thread(target=write, args=(d,)) for d in ("dag_a", "dag_b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    winner = j.store.latest_job_model()
    assert winner.version == 2
    won = [d for d, o in outcomes.items() if isinstance(o, dict) and o["written"]]
    lost = [d for d, o in outcomes.items() if isinstance(o, AirflowFailException)]
    assert won == [winner.created_by.split(":")[1].split("/")[0]]
    assert len(lost) == 1 and winner.created_by in str(outcomes[lost[0]])
    assert len(j.store.job_model_history()) == 2


def test_operators_work_on_a_file_coordinator_store(job, admin, tmp_path):
    """coordinator=<path>: the same plan -> expand -> (barrier, stop) -> write, with the job's
    metadata in files."""
    from airflow_samza_expand.core.model import JobModel
    from airflow_samza_expand.store._files import FileCoordinatorStore

    j = job(2, write_model=False)
    store = FileCoordinatorStore(str(tmp_path), j.name)
    store.write_job_model(JobModel.initial(j.name, {j.topic: 2}))
    where = {"job_name": j.name, "coordinator": str(tmp_path)}

    plan = PlanExpansionOperator(task_id="plan", targets={j.topic: 4}, **where).execute(
        task_context("plan")
    )
    ExpandPartitionsOperator(
        task_id="expand", topic=j.topic, factor=2, expansion_id=plan["expansion_id"], **where
    ).execute(task_context("expand"))
    _barrier_passed_and_job_stopped(store, plan["expansion_id"])
    written = WriteJobModelOperator(
        task_id="write", expansion_id=plan["expansion_id"], **where
    ).execute(task_context("write"))

    assert written["version"] == 2 and written["written"] is True
    assert store.latest_job_model().partition_counts() == {j.topic: 4}
    assert store.get_expansion(plan["expansion_id"]).results["write"]["version"] == 2
    assert j.store.latest_job_model() is None  # nothing went to the Kafka coordinator topic


def test_plan_refuses_a_stale_record_of_an_earlier_job_with_the_same_name(job):
    j = job(2)
    first = _plan(j).execute(task_context("plan"))
    record = j.store.get_expansion(first["expansion_id"])
    stale = dataclasses.replace(record, base_version=7, target_version=8)
    j.store.put_expansion(stale, expected_revision=record.revision)
    release = j.store.get_lease("expansion")
    j.store.release_lease(release)
    with pytest.raises(AirflowFailException, match="exists from job model v7"):
        _plan(j).execute(task_context("plan", dag_id="a_later_dag"))
