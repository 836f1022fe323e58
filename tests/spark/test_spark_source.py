"""The Kafka streaming data source, driven directly (its driver and executor methods)."""

from __future__ import annotations

import json

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
from spark_helpers import committed, create_topic, grow_topic, produce_sequenced

from airflow_samza_expand.core._plan import plan_expansion
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.spark._source import (
    SOURCE_SCHEMA,
    ReadSplit,
    SamzaKafkaStreamReader,
)

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def _reader(bootstrap: str, model: JobModel, **options: str) -> SamzaKafkaStreamReader:
    return SamzaKafkaStreamReader(
        SOURCE_SCHEMA, {"job_model": model.to_json(), "bootstrap_servers": bootstrap, **options}
    )


def _records(reader: SamzaKafkaStreamReader, start: dict, end: dict) -> list[tuple]:
    rows = []
    for part in reader.partitions(start, end):
        for batch in reader.read(part):
            d = batch.to_pydict()
            rows += list(
                zip(
                    d["task"],
                    d["topic"],
                    d["partition"],
                    d["offset"],
                    d["key"],
                    d["value"],
                    strict=True,
                )
            )
    return rows


def test_one_split_per_partition_exact_ranges_and_replay(kafka_bootstrap, unique_topic) -> None:
    topic = unique_topic("src")
    create_topic(kafka_bootstrap, topic, 2)
    produce_sequenced(kafka_bootstrap, topic, [f"k{i}" for i in range(20)], 10)  # 200 records
    model = JobModel.initial("job-" + topic, {topic: 2})
    reader = _reader(kafka_bootstrap, model)
    try:
        start = reader.initialOffset()
        assert start == {topic: {"0": 0, "1": 0}}
        end = reader.latestOffset(start, ReadAllAvailable())
        assert json.dumps(end) == json.dumps(end, sort_keys=True)
        assert sum(end[topic].values()) == 200
        parts = reader.partitions(start, end)
        assert [(p.tasks, p.ranges) for p in parts] == [
            (["Partition 0"], [(topic, 0, 0, end[topic]["0"])]),
            (["Partition 1"], [(topic, 1, 0, end[topic]["1"])]),
        ]
        # A sub-range gives exactly its records, and the same range gives the same records.
        mid = {topic: {"0": 3, "1": 5}}
        first = _records(reader, mid, end)
        assert len(first) == 200 - 8
        assert first == _records(reader, mid, end)
        for task, _t, partition, offset, _k, _v in first:
            assert task == f"Partition {partition}"
            assert mid[topic][str(partition)] <= offset < end[topic][str(partition)]
        # No new data: latestOffset hands back start as it is.
        assert reader.latestOffset(end, ReadAllAvailable()) == end
    finally:
        reader.stop()


def test_cap_is_split_fairly_and_commit_sets_group_offsets(kafka_bootstrap, unique_topic) -> None:
    topic = unique_topic("cap")
    create_topic(kafka_bootstrap, topic, 2)
    produce_sequenced(kafka_bootstrap, topic, [f"k{i}" for i in range(20)], 10)
    model = JobModel.initial("job-" + topic, {topic: 2})
    reader = _reader(kafka_bootstrap, model, max_records_per_batch="50")
    try:
        assert reader.getDefaultReadLimit() == ReadMaxRows(50)
        start = reader.initialOffset()
        end = reader.latestOffset(start, ReadMaxRows(50))
        assert end == {topic: {"0": 25, "1": 25}}
        assert len(_records(reader, start, end)) == 50
        # Trigger.AvailableNow-style limit: all that is there.
        everything = reader.latestOffset(start, ReadAllAvailable())
        assert sum(everything[topic].values()) == 200
        reader.commit(end)
        assert committed(kafka_bootstrap, model.job_name, topic, 2) == {0: 25, 1: 25}
    finally:
        reader.stop()


def test_partitions_added_by_expansion_start_at_log_start(kafka_bootstrap, unique_topic) -> None:
    topic = unique_topic("grow")
    create_topic(kafka_bootstrap, topic, 2)
    keys = [f"k{i}" for i in range(20)]
    seqs = produce_sequenced(kafka_bootstrap, topic, keys, 5)
    v1 = JobModel.initial("job-" + topic, {topic: 2})
    old = _reader(kafka_bootstrap, v1)
    checkpoint_end = old.latestOffset(old.initialOffset(), ReadAllAvailable())
    old.stop()
    grow_topic(kafka_bootstrap, topic, 4)
    produce_sequenced(kafka_bootstrap, topic, keys, 5, first_seq=seqs)
    v2 = plan_expansion(v1, {topic: 4}, {topic: 4}).new_job_model
    reader = _reader(kafka_bootstrap, v2)
    try:
        end = reader.latestOffset(checkpoint_end, ReadAllAvailable())
        assert sorted(end[topic]) == ["0", "1", "2", "3"]
        parts = reader.partitions(checkpoint_end, end)
        assert [len(p.ranges) for p in parts] == [1, 1, 1, 1]  # a read task per partition
        assert {t for p in parts for t in p.tasks} == {"Partition 0", "Partition 1"}  # fixed
        new_ranges = [r for p in parts for r in p.ranges if r[1] >= 2]
        assert new_ranges and all(r[2] == 0 for r in new_ranges)  # from the log start
        rows = _records(reader, checkpoint_end, end)
        assert len(rows) == 100  # exactly the records produced after the checkpoint
        for task, _t, partition, *_ in rows:
            assert task == f"Partition {partition % 2}"
    finally:
        reader.stop()
    # capped at one split: one read task reads the four partitions, each row with its task
    packed = _reader(kafka_bootstrap, v2, max_read_splits="1")
    try:
        (split,) = packed.partitions(checkpoint_end, end)
        assert split.tasks == ["Partition 0", "Partition 1", "Partition 0", "Partition 1"]
        together = _records(packed, checkpoint_end, end)
        assert len(together) == 100
        for p in range(4):  # every partition's records, in offset order (interleaved across)
            assert [r for r in together if r[2] == p] == [r for r in rows if r[2] == p]
    finally:
        packed.stop()


def test_batch_naming_an_unknown_ssp_is_refused(kafka_bootstrap) -> None:
    model = JobModel.initial("job-x", {"orders": 2})
    reader = _reader(kafka_bootstrap, model)
    with pytest.raises(RuntimeError, match=r"orders\[7\].*does not read"):
        reader.partitions({"orders": {"0": 0}}, {"orders": {"0": 1, "7": 3}})
    assert isinstance(ReadSplit([], []).ranges, list)


def test_read_splits_in_one_worker_share_one_consumer(
    kafka_bootstrap, unique_topic, monkeypatch
) -> None:
    """A Python worker reads its splits with one pooled consumer (not a client per split and
    batch); a read given up midway closes its consumer instead of pooling it."""
    from airflow_samza_expand._kafka import clients
    from airflow_samza_expand.spark import _source_read

    made: list[object] = []

    class CountingConsumer(clients.Consumer):
        def __init__(self, config: dict) -> None:
            made.append(self)
            super().__init__(config)

    monkeypatch.setattr(clients, "Consumer", CountingConsumer)
    monkeypatch.setattr(_source_read, "_IDLE", {})
    topic = unique_topic("pool")
    create_topic(kafka_bootstrap, topic, 2)
    produce_sequenced(kafka_bootstrap, topic, [f"k{i}" for i in range(20)], 10)
    reader = _reader(kafka_bootstrap, JobModel.initial("job-" + topic, {topic: 2}))
    try:
        start = reader.initialOffset()
        end = reader.latestOffset(start, ReadAllAvailable())
        made.clear()  # the driver side's own client
        first = _records(reader, start, end)
        assert len(first) == 200 and first == _records(reader, start, end)
        assert len(made) == 1, "four split reads in one worker share one consumer"
        partial = reader.read(reader.partitions(start, end)[0])
        next(partial)
        partial.close()  # given up midway: its consumer is closed, not pooled
        assert sum(len(idle) for idle in _source_read._IDLE.values()) == 0
        assert len(_records(reader, start, end)) == 200 and len(made) == 2
    finally:
        reader.stop()
        for idle in _source_read._IDLE.values():
            for consumer in idle:
                consumer.close()
