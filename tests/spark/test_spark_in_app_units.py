"""The in-app restart's job side without Spark or Kafka: the processor advertises
``in-app`` only when it holds the function starting its query and reads with Spark's own
source, and restarts on vN+1 only once the expansion's barrier has passed."""

from __future__ import annotations

import argparse
import json

from airflow_samza_expand.core._clock import now_iso
from airflow_samza_expand.core._liveness import statuses
from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.spark._lifecycle import Lifecycle
from airflow_samza_expand.spark._switch import barrier_passed
from airflow_samza_expand.spark.runtime import Job
from airflow_samza_expand.store._files import FileCoordinatorStore

JOB = "caps"


def _store(tmp_path) -> FileCoordinatorStore:
    store = FileCoordinatorStore(str(tmp_path), JOB)
    store.write_job_model(JobModel.initial(JOB, {"orders": 2}))
    return store


def test_heartbeats_advertise_in_app_only_for_a_restartable_query_on_sparks_source(tmp_path):
    store = _store(tmp_path)
    restartable = Lifecycle(store, JOB, "fn", {}, use_lease=True)
    restartable.in_app = True  # job.run(start) + read_kafka() (Spark's own source)
    restartable.heartbeat("running")
    reader = Lifecycle(store, JOB, "reader", {}, use_lease=True)
    reader.in_app = reader.in_place = True  # job.run(start) + read_kafka(source="python")
    reader.heartbeat("running")
    seen = statuses(store.processors())
    assert seen["fn"].capabilities == ("in-app", "standby")
    assert seen["reader"].capabilities == ("in-place", "standby")  # it switches without restart


def _expansion(store, status: ExpansionStatus, barrier: dict) -> None:
    stamp = now_iso()
    record = ExpansionRecord(
        expansion_id="caps~orders.2-4", job_name=JOB, base_version=1, target_version=2,
        plan={"counts_before": {"orders": 2}, "counts_after": {"orders": 4}},
        status=status, owner="test", created_at=stamp, updated_at=stamp, barrier=barrier,
    )  # fmt: skip
    store.put_expansion(record, expected_revision=0)


def test_vn1_is_taken_in_app_only_once_the_barrier_has_passed(tmp_path):
    store = _store(tmp_path)
    assert barrier_passed(store, 2, None)[0]  # a job model no expansion made: at once
    _expansion(store, ExpansionStatus.EXPANDED, {})
    ready, why = barrier_passed(store, 2, {"orders": {"0": 10, "1": 10}})
    assert not ready and "snapshot" in why
    store = _store(tmp_path / "b")
    _expansion(store, ExpansionStatus.BARRIER_SNAPSHOT, {"orders": {"0": 7, "1": 9}})
    ready, why = barrier_passed(store, 2, {"orders": {"0": 7, "1": 8}})
    assert not ready and "orders:1" in why  # one old partition short of H
    assert barrier_passed(store, 2, {"orders": {"0": 7, "1": 9}})[0]
    store = _store(tmp_path / "c")
    _expansion(store, ExpansionStatus.JOB_MODEL_WRITTEN, {"orders": {"0": 7, "1": 9}})
    assert barrier_passed(store, 2, None)[0]  # the record says the barrier held


def test_run_refuses_a_start_function_that_does_not_return_a_query(tmp_path):
    job = Job(argparse.Namespace(processor_id="p", bootstrap_servers="", kafka_config=None))
    job.start_query = lambda: "not a query"
    try:
        job._started()
    except TypeError as exc:
        assert "start() returned 'not a query'" in str(exc) and "writeStream" in str(exc)
    else:
        raise AssertionError("a start() without a query was accepted")


def test_sparks_source_reads_with_a_short_fetch_wait_unless_the_job_sets_one():
    """Spark's pooled consumer of a partition otherwise waits out a 500 ms fetch at the log end
    before each batch's read of it; the connection's setting and the job's own options win."""
    from airflow_samza_expand.spark._in_app import spark_source_settings

    model = JobModel.initial(JOB, {"orders": 2})
    settings = spark_source_settings(model, {"kafka.bootstrap.servers": "k:9092"}, "{}", 0, {}, "g")
    assert settings["kafka.fetch.max.wait.ms"] == "10"
    assert (
        settings["kafka.bootstrap.servers"] == "k:9092" and "maxOffsetsPerTrigger" not in settings
    )
    assert json.loads(settings["assign"]) == {"orders": [0, 1]}
    # one group id per job, never the committed group: a restarted query finds Spark's pooled
    # consumers again (a query without one gets a new random group id at each start)
    assert settings["kafka.group.id"] == "g.spark-source"
    connection = {"kafka.fetch.max.wait.ms": "200"}
    assert (
        spark_source_settings(model, connection, "{}", 0, {}, "g")["kafka.fetch.max.wait.ms"]
        == "200"
    )
    own = spark_source_settings(
        model, connection, "{}", 50, {"kafka.fetch.max.wait.ms": "500"}, "g"
    )
    assert own["kafka.fetch.max.wait.ms"] == "500" and own["maxOffsetsPerTrigger"] == "50"
