"""docs/design.md 'The switch in place', driven directly: the driver publishes vN+1
(`spark._switch`), the provider's reader takes it at a batch's planning and admits a child
partition once its own position on the parent reached the barrier snapshot (no Spark session
needed)."""

from __future__ import annotations

import json
import threading

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable
from spark_helpers import create_topic, grow_topic, produce_raw

from airflow_samza_expand.core._clock import now_iso
from airflow_samza_expand.core._plan import plan_expansion
from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.spark._source import SOURCE_SCHEMA, SamzaKafkaStreamReader
from airflow_samza_expand.spark._switch import SwitchPublisher, snapshots_up_to
from airflow_samza_expand.store._files import FileCoordinatorStore

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def _expansion(job: str, barrier: dict | None) -> ExpansionRecord:
    stamp = now_iso()
    return ExpansionRecord(
        expansion_id="exp-1", job_name=job, base_version=1, target_version=2,
        plan={}, status=ExpansionStatus.EXPANDED, owner="test", created_at=stamp,
        updated_at=stamp, barrier=barrier,
    )  # fmt: skip


def test_publisher_waits_for_the_snapshot_then_publishes_once(tmp_path) -> None:
    store = FileCoordinatorStore(str(tmp_path / "coord"), "job")
    v1 = store.write_job_model(JobModel.initial("job", {"orders": 2}))
    publisher = SwitchPublisher(store, v1, str(tmp_path / "switch"), threading.Lock())
    assert publisher.poll() is None  # nothing newer
    store.write_job_model(plan_expansion(v1, {"orders": 4}, {"orders": 4}).new_job_model)
    record = store.put_expansion(_expansion("job", None), expected_revision=0)
    assert publisher.poll() is None and not (tmp_path / "switch").exists()  # no H yet
    store.put_expansion(
        _expansion("job", {"orders": {0: 5, 1: 7}}), expected_revision=record.revision
    )
    assert snapshots_up_to(store, 2) == [{"orders": {"0": 5, "1": 7}}]
    assert publisher.poll() == 2 and (tmp_path / "switch").exists()
    assert publisher.poll() is None  # published once
    assert publisher.reading() is None


def test_reader_switches_at_planning_and_gates_each_child_by_its_parent(
    kafka_bootstrap, unique_topic, tmp_path
) -> None:
    topic = unique_topic("inplace")
    create_topic(kafka_bootstrap, topic, 2)
    produce_raw(kafka_bootstrap, topic, [(p, f"k{p}", {"n": i}) for i in range(5) for p in (0, 1)])
    store = FileCoordinatorStore(str(tmp_path / "coord"), "job-" + topic)
    v1 = store.write_job_model(JobModel.initial("job-" + topic, {topic: 2}))
    switch = str(tmp_path / "switch")
    reader = SamzaKafkaStreamReader(
        SOURCE_SCHEMA,
        {"job_model": v1.to_json(), "bootstrap_servers": kafka_bootstrap, "switch_path": switch},
    )
    publisher = SwitchPublisher(store, v1, switch, threading.Lock())
    try:
        start = reader.initialOffset()
        at_h = reader.latestOffset(start, ReadAllAvailable())  # 5 records each: H = {0: 5, 1: 5}
        assert at_h == {topic: {"0": 5, "1": 5}}
        grow_topic(kafka_bootstrap, topic, 4)
        store.write_job_model(plan_expansion(v1, {topic: 4}, {topic: 4}).new_job_model)
        store.put_expansion(_expansion(v1.job_name, {topic: {0: 5, 1: 5}}), expected_revision=0)
        produce_raw(kafka_bootstrap, topic, [(p, f"k{p}", {"n": 9}) for p in (0, 1, 2, 3)] * 2)
        assert publisher.poll() == 2
        # parent 0 is behind H[0], parent 1 has reached H[1]: child 3 is read, child 2 waits
        behind = {topic: {"0": 4, "1": 5}}
        end = reader.latestOffset(behind, ReadAllAvailable())
        assert reader.model.version == 2 and publisher.reading() == 2
        assert end == {topic: {"0": 7, "1": 7, "3": 2}}
        ranges = sorted(r for p in reader.partitions(behind, end) for r in p.ranges)
        assert ranges == [(topic, 0, 4, 7), (topic, 1, 5, 7), (topic, 3, 0, 2)]
        # once its parent passed H[0], child 2 is read from its log start
        end2 = reader.latestOffset(end, ReadAllAvailable())
        assert end2 == {topic: {"0": 7, "1": 7, "2": 2, "3": 2}}
        assert reader.latestOffset(end2, ReadAllAvailable()) == end2  # no new data
    finally:
        reader.stop()


def test_a_restart_on_vn1_from_a_vn_checkpoint_still_gates(kafka_bootstrap, unique_topic) -> None:
    topic = unique_topic("restart")
    create_topic(kafka_bootstrap, topic, 4)
    produce_raw(kafka_bootstrap, topic, [(p, "k", {"n": 1}) for p in (0, 1, 2, 3)] * 3)
    v1 = JobModel.initial("job-" + topic, {topic: 2})
    v2 = plan_expansion(v1, {topic: 4}, {topic: 4}).new_job_model
    reader = SamzaKafkaStreamReader(
        SOURCE_SCHEMA,
        {"job_model": v2.to_json(), "bootstrap_servers": kafka_bootstrap,
         "snapshots": json.dumps([{topic: {"0": 2, "1": 3}}])},
    )  # fmt: skip
    try:
        end = reader.latestOffset({topic: {"0": 1, "1": 3}}, ReadAllAvailable())
        assert end == {topic: {"0": 3, "1": 3, "3": 3}}
    finally:
        reader.stop()
