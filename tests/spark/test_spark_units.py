"""Pure unit tests of the spark layer's helpers (no Spark session, no Kafka)."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import pytest

from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.spark._processor import SequenceCounter, load_processor, parse_seq
from airflow_samza_expand.spark._source import fair_split, offsets_json
from airflow_samza_expand.spark._state import (
    TASK_SET_FILE,
    IncompatibleCheckpointError,
    check_task_set,
    write_task_set,
)
from airflow_samza_expand.spark.job import UsageError, parse_trigger

pytestmark = pytest.mark.spark


def _rows(task: str, key: str, seqs: list[int | None]) -> pd.DataFrame:
    values = [None if s is None else json.dumps({"seq": s}).encode() for s in seqs]
    return pd.DataFrame(
        {
            "task": task,
            "topic": "t",
            "partition": 0,
            "offset": range(len(seqs)),
            "key": key,
            "value": values,
        }
    )


@pytest.mark.parametrize(
    ("seqs", "violations", "last_seq"),
    [
        ([0, 1, 2, 3], 0, 3),  # in order
        ([0, 1, 3, 2, 4], 3, 4),  # reordered: 3 (want 2), 2 (want 4), 4 (want 3)
        ([0, 1, 3], 1, 3),  # lost record
        ([0, 1, 1, 2], 1, 2),  # repeated record: the second 1 (want 2); then 2 follows 1
        ([5, 6], 1, 6),  # first record of a key is not seq 0 (its state was lost)
    ],
)
def test_sequence_counter_semantics(seqs: list[int], violations: int, last_seq: int) -> None:
    counter = SequenceCounter()
    state, outputs = counter.process(counter.init_state(), _rows("Partition 0", "k", seqs))
    assert state == {"count": len(seqs), "last_seq": last_seq, "violations": violations}
    assert outputs == [
        {
            "key": "k",
            "count": len(seqs),
            "last_seq": last_seq,
            "task": "Partition 0",
            "violations": violations,
        }
    ]


def test_sequence_counter_continues_across_batches() -> None:
    counter = SequenceCounter()
    state, _ = counter.process(counter.init_state(), _rows("P", "k", [0, 1, 2]))
    state, _ = counter.process(state, _rows("P", "k", [3, 4]))
    assert state == {"count": 5, "last_seq": 4, "violations": 0}
    state, _ = counter.process(state, _rows("P", "k", [None, 5]))
    assert state == {"count": 7, "last_seq": 5, "violations": 0}


def test_parse_seq_ignores_values_without_integer_seq() -> None:
    assert parse_seq(b'{"seq": 7}') == 7
    for raw in (None, b"not json", b"[1]", b'{"seq": "7"}', b'{"seq": true}', b"\xff"):
        assert parse_seq(raw) is None


def test_load_processor_errors_name_the_problem() -> None:
    assert isinstance(
        load_processor("airflow_samza_expand.spark._processor:SequenceCounter"), SequenceCounter
    )
    assert isinstance(
        load_processor("airflow_samza_expand.spark._processor.SequenceCounter"), SequenceCounter
    )
    with pytest.raises(ValueError, match="cannot import module 'no_such_module'"):
        load_processor("no_such_module:X")
    with pytest.raises(ValueError, match="has no attribute 'Nope'"):
        load_processor("airflow_samza_expand.spark._processor:Nope")
    with pytest.raises(ValueError, match="lacks init_state"):
        load_processor("json:dumps")
    with pytest.raises(ValueError, match="not a dotted path"):
        load_processor("SequenceCounter")


def test_fair_split_shares_the_cap_and_reuses_unused_shares() -> None:
    assert fair_split({"a": 100, "b": 100}, 50) == {"a": 25, "b": 25}
    assert fair_split({"a": 5, "b": 100, "c": 100}, 60) == {"a": 5, "b": 28, "c": 27}
    assert fair_split({"a": 5, "b": 0}, 60) == {"a": 5, "b": 0}
    split = fair_split({"a": 7, "b": 9, "c": 1}, 10)
    assert sum(split.values()) == 10 and all(
        split[k] <= v for k, v in {"a": 7, "b": 9, "c": 1}.items()
    )


def test_offsets_json_sorts_like_sort_keys() -> None:
    doc = offsets_json({"z": {"10": 1, "2": 3}, "a": {"1": 4}})
    assert json.dumps(doc) == json.dumps(doc, sort_keys=True)
    assert list(doc) == ["a", "z"] and list(doc["z"]) == ["10", "2"]


def test_parse_trigger() -> None:
    assert parse_trigger("available-now") == {"availableNow": True}
    assert parse_trigger("processing-time=5s") == {"processingTime": "5 seconds"}
    assert parse_trigger("processing-time=250ms") == {"processingTime": "250 milliseconds"}
    with pytest.raises(UsageError, match="available-now"):
        parse_trigger("every-5s")


def _grown_by_partition(v1: JobModel) -> JobModel:
    from airflow_samza_expand.core.groupers import GroupByPartition
    from airflow_samza_expand.core.model import (
        StreamPartitionCounts,
        SystemStreamPartition,
        mapping_from_groups,
    )

    ssps = [SystemStreamPartition("kafka", "orders", p) for p in range(4)]
    return JobModel(
        version=2,
        job_name=v1.job_name,
        streams=(StreamPartitionCounts("kafka", "orders", 4, 2),),
        ssp_to_task=mapping_from_groups(GroupByPartition().group(ssps)),
        grouper="GroupByPartition",
    )


def test_task_set_guard(tmp_path) -> None:
    from airflow_samza_expand.core._plan import plan_expansion

    ckpt = str(tmp_path / "ckpt")
    v1 = JobModel.initial("job", {"orders": 2})
    assert check_task_set(ckpt, v1, allow_task_change=False) == []  # empty checkpoint
    write_task_set(ckpt, v1)
    fixed = plan_expansion(v1, {"orders": 2}, {"orders": 4}).new_job_model
    assert check_task_set(ckpt, fixed, allow_task_change=False) == []
    plain = _grown_by_partition(v1)
    before = (tmp_path / "ckpt" / TASK_SET_FILE).read_text()
    with pytest.raises(IncompatibleCheckpointError, match="task set changed") as info:
        check_task_set(ckpt, plain, allow_task_change=False)
    assert "--allow-task-change" in str(info.value) and "FixedTasks" in str(info.value)
    assert (tmp_path / "ckpt" / TASK_SET_FILE).read_text() == before  # refusal changes nothing
    assert check_task_set(ckpt, plain, allow_task_change=True)
    other = JobModel.initial("other-job", {"orders": 2})
    with pytest.raises(IncompatibleCheckpointError, match="belongs to job 'job'"):
        check_task_set(ckpt, other, allow_task_change=True)


def test_task_set_guard_refuses_foreign_checkpoint(tmp_path) -> None:
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "0").write_text("v1")
    with pytest.raises(IncompatibleCheckpointError, match=f"no {TASK_SET_FILE}"):
        check_task_set(
            str(tmp_path), JobModel.initial("job", {"orders": 2}), allow_task_change=False
        )


class FakeGroupState:
    """The part of Spark's GroupState the stateful function uses."""

    def __init__(self) -> None:
        self.value: tuple | None = None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self) -> tuple:
        assert self.value is not None
        return self.value

    def update(self, value: tuple) -> None:
        self.value = value


def _shuffled_rows(task: str, keys_seqs: dict[str, list[int]], seed: int) -> pd.DataFrame:
    import random

    rows = []
    for key, seqs in keys_seqs.items():
        half = len(seqs) // 2
        for i, seq in enumerate(seqs):
            # first half in partition 0 (offsets 100..), the rest in partition 1 (offsets 0..):
            # only (partition, offset) order - not offset order alone - gives seq order
            partition, offset = (0, 100 + i) if i < half else (1, i - half)
            rows.append((task, "t", partition, offset, key, json.dumps({"seq": seq}).encode()))
    random.Random(seed).shuffle(rows)
    return pd.DataFrame(rows, columns=["task", "topic", "partition", "offset", "key", "value"])


@pytest.mark.parametrize(("buckets", "shards"), [(0, 0), (4, 0), (0, 4)])
def test_stateful_function_orders_rows_and_keeps_state_per_key(buckets: int, shards: int) -> None:
    from airflow_samza_expand.spark._processor import DEFAULT_PROCESSOR
    from airflow_samza_expand.spark._state import StatefulFunction

    fn = StatefulFunction(DEFAULT_PROCESSOR, buckets, shards)
    buckets = buckets or shards  # one shared state row for both keys either way
    # Rows arrive shuffled and split in two chunks; sorted by (partition, offset) they are in
    # seq order, so no violation shows.
    seqs = {"a": list(range(10)), "b": list(range(6))}
    state = FakeGroupState()
    frame = _shuffled_rows("P", seqs, seed=1)
    results = {}
    groups = [("a", frame[frame.key == "a"]), ("b", frame[frame.key == "b"])]
    if buckets:
        groups = [("bucket", frame)]  # both keys in one bucket, one shared state row
    states = {}
    for name, rows in groups:
        st = states.setdefault(name, FakeGroupState() if buckets == 0 else state)
        half = len(rows) // 2
        for out in fn(("P", name), iter([rows.iloc[:half], rows.iloc[half:]]), st):
            for key, records, value in zip(out.key, out.records, out.value, strict=True):
                results[key] = (records, json.loads(value))
    assert results["a"][0] == 10 and results["b"][0] == 6
    assert results["a"][1] == {"key": "a", "task": "P", "count": 10, "last_seq": 9, "violations": 0}
    assert results["b"][1] == {"key": "b", "task": "P", "count": 6, "last_seq": 5, "violations": 0}
    # Next batch continues each key's state.
    more = pd.DataFrame(
        [("P", "t", 0, 100, "a", b'{"seq": 10}')],
        columns=["task", "topic", "partition", "offset", "key", "value"],
    )
    st = state if buckets else states["a"]
    (out,) = list(fn(("P", "bucket" if buckets else "a"), iter([more]), st))
    assert json.loads(out.value.iloc[0])["count"] == 11


def test_state_shards_keep_one_state_per_task_and_key_across_tasks() -> None:
    """One shard holds keys of two tasks, the same key name in both: each (task, key) keeps its
    own state and its output names its own task, batch after batch (state keyed by the key
    alone would count both tasks' "a" as one sequence)."""
    from airflow_samza_expand.spark._processor import DEFAULT_PROCESSOR
    from airflow_samza_expand.spark._state import StatefulFunction

    fn = StatefulFunction(DEFAULT_PROCESSOR, shards=4)
    state = FakeGroupState()
    first = pd.concat(
        [
            _shuffled_rows("Partition 0", {"a": list(range(8)), "b": list(range(3))}, seed=2),
            _shuffled_rows("Partition 1", {"a": list(range(5))}, seed=3),
        ],
        ignore_index=True,
    ).sample(frac=1.0, random_state=4)
    first = first.assign(shard=3)  # the grouping column Spark passes along
    (out,) = list(fn((3,), iter([first.iloc[:7], first.iloc[7:]]), state))
    seen = {
        (t, k): (n, json.loads(v))
        for t, k, n, v in zip(out.task, out.key, out.records, out.value, strict=True)
    }
    assert {name: n for name, (n, _) in seen.items()} == {
        ("Partition 0", "a"): 8, ("Partition 0", "b"): 3, ("Partition 1", "a"): 5,
    }  # fmt: skip
    for (task, key), (_, value) in seen.items():
        assert value["task"] == task and value["key"] == key and value["violations"] == 0
    more = pd.DataFrame(
        [
            ("Partition 1", "t", 0, 200, "a", b'{"seq": 5}'),
            ("Partition 0", "t", 0, 200, "a", b'{"seq": 8}'),
        ],
        columns=["task", "topic", "partition", "offset", "key", "value"],
    )
    (out,) = list(fn((3,), iter([more]), state))
    counts = {(t, json.loads(v)["count"]) for t, v in zip(out.task, out.value, strict=True)}
    assert counts == {("Partition 0", 9), ("Partition 1", 6)}
    saved = json.loads(state.get[0])
    assert [row[:2] for row in saved] == [
        ["Partition 0", "a"],
        ["Partition 0", "b"],
        ["Partition 1", "a"],
    ]


def test_state_buckets_and_shards_exclude_each_other() -> None:
    from airflow_samza_expand.spark._processor import DEFAULT_PROCESSOR
    from airflow_samza_expand.spark._state import StatefulFunction, state_layout

    with pytest.raises(ValueError, match="exclude each other"):
        StatefulFunction(DEFAULT_PROCESSOR, buckets=2, shards=2)
    assert [state_layout(0), state_layout(8), state_layout(0, 16)] == [
        "key",
        "bucket/8",
        "shard/16",
    ]


def test_a_checkpoint_keeps_the_state_layout_it_was_written_in(tmp_path) -> None:
    """Restarting a checkpoint in another state layout would read no state for any key: it is
    refused, naming both layouts and the fix."""
    from airflow_samza_expand.spark._state import (
        IncompatibleCheckpointError,
        check_task_set,
        state_layout,
        write_task_set,
    )

    model = JobModel.initial("j", {"orders": 2})
    write_task_set(str(tmp_path), model, state_layout(0, 8))
    assert check_task_set(str(tmp_path), model, allow_task_change=False, layout="shard/8") == []
    for other in (state_layout(0), state_layout(8), state_layout(0, 16)):
        with pytest.raises(IncompatibleCheckpointError, match=f"'shard/8', not '{other}'"):
            check_task_set(str(tmp_path), model, allow_task_change=False, layout=other)


def test_job_bad_input_exits_2_with_a_clear_message_and_changes_nothing(tmp_path, capsys) -> None:
    from airflow_samza_expand.spark.job import main

    base = ["--job-name", "j", "--coordinator", str(tmp_path / "coord"),
            "--checkpoint-dir", str(tmp_path / "ckpt"), "--output-topic", "out"]  # fmt: skip
    cases = [
        ([], "no Kafka given"),
        (["--bootstrap-servers", "127.0.0.1:1", "--trigger", "once"], "trigger 'once'"),
        (["--bootstrap-servers", "127.0.0.1:1", "--processor", "nope:X"], "cannot import"),
        (["--bootstrap-servers", "127.0.0.1:1", "--max-records-per-batch", "-1"], ">= 0"),
        (["--bootstrap-servers", "127.0.0.1:1", "--max-read-splits", "-2"], "--max-read-splits"),
        (["--bootstrap-servers", "127.0.0.1:1", "--state-shards", "-1"], "--state-shards must"),
        (
            ["--bootstrap-servers", "127.0.0.1:1", "--state-shards", "4", "--state-buckets", "4"],
            "give one of them",
        ),
        (["--bootstrap-servers", "127.0.0.1:1"], "has no job model for job 'j'"),
    ]
    for extra, message in cases:
        assert main(base + extra) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "ckpt").exists()


@pytest.mark.parametrize(
    ("group", "problem"),
    [(" ", "is not a group name"), ("j.active", "is the job's lease group")],
)
def test_a_consumer_group_that_cannot_hold_the_jobs_offsets_is_refused(group, problem) -> None:
    from airflow_samza_expand._kafka.membership import lease_group
    from airflow_samza_expand.spark._args import parse_args, validate_runtime_args

    assert lease_group("j") == "j.active"
    argv = ["--job-name", "j", "--checkpoint-dir", "/c", "--bootstrap-servers", "b:9092"]
    validate_runtime_args(parse_args([*argv, "--consumer-group", "orders-app"], {})[0])
    with pytest.raises(UsageError, match=problem):
        validate_runtime_args(parse_args([*argv, "--consumer-group", group], {})[0])


def test_the_python_worker_setting_makes_spark_use_unix_sockets(spark) -> None:
    """`PYTHON_WORKER_CONF` is a setting Spark acts on: a session started with it (as the
    shipped job's and this suite's are) runs its Python tasks over a Unix domain socket."""
    import os

    from airflow_samza_expand.spark._python_workers import uses_unix_sockets

    assert uses_unix_sockets(spark) is True
    rdd = spark.sparkContext.parallelize([0, 1], 2)
    seen = rdd.map(lambda _: os.environ.get("PYTHON_UNIX_DOMAIN_ENABLED", "")).collect()
    assert [flag.lower() for flag in seen] == ["true", "true"]  # what pyspark/daemon.py reads


def test_a_python_worker_freezes_its_heap_from_its_second_task(spark) -> None:
    """Spark's daemon collects a reused worker's whole heap after every task: from its second
    task on, a worker that runs the reader or the state function has frozen its heap (later
    collections scan only newer objects); outside a Spark task nothing is frozen."""
    import gc
    import os

    from airflow_samza_expand.spark._python_workers import freeze_after_first_task

    def probe(rows: Any) -> Any:
        list(rows)
        before = gc.get_freeze_count()
        freeze_after_first_task()
        yield (os.getpid(), before, gc.get_freeze_count())

    frozen_here = gc.get_freeze_count()
    freeze_after_first_task()  # the driver: no task context
    assert gc.get_freeze_count() == frozen_here
    runs: dict[int, list[tuple[int, int]]] = {}
    for _ in range(4):
        for pid, before, after in (
            spark.sparkContext.parallelize([0, 1], 2).mapPartitions(probe).collect()
        ):
            runs.setdefault(pid, []).append((before, after))
    assert any(len(r) >= 2 for r in runs.values()), f"no worker was reused: {runs}"
    for pid, seen in runs.items():
        assert all(after > 0 for _, after in seen[1:]), f"worker {pid} never froze: {seen}"


def test_commit_progress_reads_only_the_newest_report_unless_batches_were_missed(tmp_path) -> None:
    """Spark's ``recentProgress`` (up to 100 reports, each with every partition's offsets) is
    parsed whole at each read: the watch reads it only when the progress file missed a batch."""
    import argparse

    from airflow_samza_expand.spark._driving import QueryDriver

    def report(batch: int) -> dict:
        return {"batchId": batch, "numInputRows": 1, "durationMs": {"addBatch": 5},
                "timestamp": "t", "stateOperators": [], "sources": []}  # fmt: skip

    class Query:
        def __init__(self) -> None:
            self.reports: list[dict] = []
            self.recent_reads = 0

        @property
        def lastProgress(self) -> dict | None:  # noqa: N802 - Spark's name
            return self.reports[-1] if self.reports else None

        @property
        def recentProgress(self) -> list[dict]:  # noqa: N802 - Spark's name
            self.recent_reads += 1
            return list(self.reports)

    driver = QueryDriver()
    progress = tmp_path / "progress.jsonl"
    driver.args = argparse.Namespace(progress_file=str(progress))
    driver.model, driver.last_batch_reported = None, -1
    query = Query()
    driver.commit_progress(query)  # no batch yet
    for batch in (0, 1):
        query.reports.append(report(batch))
        driver.commit_progress(query)
        driver.commit_progress(query)  # the same batch again: nothing more
    assert query.recent_reads == 0
    query.reports += [report(2), report(3), report(4)]  # two batches between polls
    driver.commit_progress(query)
    assert query.recent_reads == 1
    written = [json.loads(line)["batchId"] for line in progress.read_text().splitlines()]
    assert written == [0, 1, 2, 3, 4] and driver.last_batch_reported == 4


def test_the_batch_listener_wakes_the_watch_when_a_batch_ends(spark, tmp_path) -> None:
    """`spark._batch_events`: Spark's listener bus sets the event at a batch's end (the watch
    then commits it at once instead of at its next poll); without a session there is none."""
    from airflow_samza_expand.spark._batch_events import listen

    assert listen(None) is None
    source = str(tmp_path / "in")
    spark.createDataFrame([(1,), (2,)], "n long").write.parquet(source)
    events = listen(spark)
    assert events is not None
    try:
        query = (
            spark.readStream.schema("n long").parquet(source).writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True).start()
        )  # fmt: skip
        query.awaitTermination(120)
        assert events.wait(60)  # the batch's progress and the query's end were reported
    finally:
        events.close()


def test_a_job_model_past_sparks_kafka_consumer_pool_is_told_how_to_size_it(spark, caplog) -> None:
    """Spark's Kafka source keeps one pooled consumer per partition an executor reads, 64 by
    default; past that it closes and opens consumers every batch, and only a setting at the
    application's start changes it. A query start on a job model with more partitions per
    executor than the pool holds logs the setting to give (local[2]: one executor)."""
    import logging

    from airflow_samza_expand.core.model import JobModel
    from airflow_samza_expand.spark._in_app import (
        CONSUMER_POOL,
        consumer_pool_shortfall,
        warn_small_consumer_pool,
    )

    capacity = int(spark.sparkContext.getConf().get(CONSUMER_POOL, "64"))
    fits = JobModel.initial("pool", {"orders": capacity // 2, "payments": capacity // 2})
    grown = JobModel.initial("pool", {"orders": capacity, "payments": 2})
    assert consumer_pool_shortfall(spark, fits) is None
    assert consumer_pool_shortfall(spark, grown) == (capacity + 2, capacity)
    with caplog.at_level(logging.WARNING, logger="airflow_samza_expand.spark.runtime"):
        assert not warn_small_consumer_pool(spark, fits)
        assert not caplog.records
        assert warn_small_consumer_pool(spark, grown)
    (record,) = caplog.records
    assert f"--conf {CONSUMER_POOL}=" in record.getMessage()
    assert f"up to {capacity + 2} partitions per executor" in record.getMessage()
