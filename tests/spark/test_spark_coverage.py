"""The job notices partitions its job model does not cover (spark._coverage): the coverage
function, the periodic warning, and the ``uncovered`` heartbeat field written by the job's
heartbeat on real Kafka after the topic grew outside the job's expansion (no Spark started)."""

from __future__ import annotations

import logging
import uuid

import pytest

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.spark._coverage import (
    CoverageWatch,
    admin_live_counts,
    uncovered_partitions,
)
from airflow_samza_expand.spark._lifecycle import Lifecycle
from airflow_samza_expand.store._files import FileCoordinatorStore
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore


def test_uncovered_partitions_are_the_live_ones_beyond_the_model():
    assert uncovered_partitions({"orders": 2, "pay": 4}, {"orders": 8, "pay": 4}) == {
        "orders": [2, 3, 4, 5, 6, 7]
    }
    assert uncovered_partitions({"orders": 4}, {"orders": 4}) == {}
    assert uncovered_partitions({"orders": 4}, {"orders": 2, "other": 9}) == {}


def test_the_watch_rereads_when_due_and_warns_each_time(caplog):
    live = {"orders": 2}
    now = [0.0]
    watch = CoverageWatch({"orders": 2}, 1, lambda topics: dict(live), 60.0, lambda: now[0])
    assert watch.poll() == {}
    live["orders"] = 4
    now[0] = 30.0
    assert watch.poll() == {}  # not due: the last finding
    with caplog.at_level(logging.WARNING, "airflow_samza_expand.spark._coverage"):
        now[0] = 60.0
        assert watch.poll() == {"orders": [2, 3]}
        now[0] = 120.0
        assert watch.poll() == {"orders": [2, 3]}
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2 and "orders partitions [2, 3]" in warnings[0]
    assert "job model v1" in warnings[0] and "expand this job too" in warnings[0]


def test_a_failed_metadata_read_keeps_the_last_finding():
    calls = []

    def live(topics):
        calls.append(topics)
        if len(calls) > 1:
            raise RuntimeError("broker hiccup")
        return {"orders": 4}

    now = [0.0]
    watch = CoverageWatch({"orders": 2}, 1, live, 1.0, lambda: now[0])
    assert watch.poll() == {"orders": [2, 3]}
    now[0] = 5.0
    assert watch.poll() == {"orders": [2, 3]}


@pytest.mark.kafka
def test_the_job_heartbeat_reports_partitions_grown_outside_its_model(
    kafka_bootstrap, unique_topic, tmp_path
):
    config = client_config(kafka_bootstrap)
    topic, name = unique_topic("orders"), f"job-{uuid.uuid4().hex[:10]}"
    with KafkaAdmin(config, timeout_s=15) as admin, KafkaCoordinatorStore(config, name) as store:
        admin.ensure_topic(topic, 2)
        model = store.write_job_model(JobModel.initial(name, {topic: 2}))
        life = Lifecycle(store, name, "p-1", config, use_lease=False)
        life.version = model.version
        life.coverage = CoverageWatch({topic: 2}, 1, admin_live_counts(config), interval_s=0.0)
        life.heartbeat("running")
        assert "uncovered" not in store.processors()["p-1"]

        admin.create_partitions(topic, 8)  # grown by someone else
        life.heartbeat("running")
        assert store.processors()["p-1"]["uncovered"] == {topic: [2, 3, 4, 5, 6, 7]}


def test_the_file_store_keeps_the_uncovered_field(tmp_path):
    store = FileCoordinatorStore(str(tmp_path), "job-a")
    store.heartbeat("p-1", 1, "running", uncovered={"orders": [3, 2]})
    store.heartbeat("p-2", 1, "running")
    found = store.processors()
    assert found["p-1"]["uncovered"] == {"orders": [2, 3]}
    assert "uncovered" not in found["p-2"]


@pytest.mark.kafka
@pytest.mark.spark
def test_a_running_job_reports_partitions_grown_outside_its_job_model(
    spark, kafka_bootstrap, unique_topic, tmp_path, caplog
):
    from spark_helpers import grow_topic, produce_sequenced
    from test_spark_job import Job

    job = Job(spark, kafka_bootstrap, unique_topic, tmp_path)
    job.store.write_job_model(JobModel.initial(job.name, {job.topic: 2}))
    produce_sequenced(kafka_bootstrap, job.topic, [f"key-{i}" for i in range(10)], 5)
    grow_topic(kafka_bootstrap, job.topic, 4)  # grown by someone else: the model still says 2
    with caplog.at_level(logging.WARNING, "airflow_samza_expand.spark._coverage"):
        assert job.run() == 0
    warnings = [r.getMessage() for r in caplog.records if "not covered" in r.getMessage()]
    assert warnings and f"{job.topic} partitions [2, 3]" in warnings[0]
    processor = job.store.processors()["proc-1"]
    assert processor["state"] == "stopped"
    assert processor["uncovered"] == {job.topic: [2, 3]}
