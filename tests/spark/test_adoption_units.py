"""The start checks of a job that keeps its checkpoint (`spark._adoption`), without Spark: each
refusal over checkpoints written in Spark 4.2's own layout (offsets/N and commits/N as a
``subscribe`` job left them, measured), and what is handled instead."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from airflow_samza_expand._protocol.job.spark_checkpoint import read_checkpoint
from airflow_samza_expand.core._plan import plan_expansion
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.spark._adoption import (
    CheckpointRefused,
    check_checkpoint,
    check_partitions,
    check_source_evolution,
    check_sources,
    check_topics,
    has_committed_batch,
    log_start,
    new_partitions,
    unordered_partitions,
)

# the metadata line of an offset log Spark 4.2 wrote (its conf shortened)
CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.streaming.queryEvolution.enableSourceEvolution": "false",
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
    ),
}
MODEL = JobModel.initial("orders-counter", {"orders": 2})


def checkpoint(
    root: Path, *batches: list[str], committed: int | None = None, conf: dict | None = None
) -> str:
    """A checkpoint with offset log files of ``batches`` (each its source lines), committed up
    to ``committed`` (default: all)."""
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "metadata").write_text(json.dumps({"id": "q-1"}))
    meta = json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 1, "conf": conf or CONF})
    last = len(batches) - 1 if committed is None else committed
    for n, sources in enumerate(batches):
        (root / "offsets" / str(n)).write_text("\n".join(["v1", meta, *sources]))
        if n <= last:
            (root / "commits" / str(n)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    return str(root)


def kafka(**topics: dict[int, int]) -> str:
    return json.dumps({t.replace("_", "-"): {str(p): o for p, o in ps.items()}
                       for t, ps in topics.items()})  # fmt: skip


def test_a_subscribe_jobs_checkpoint_on_the_models_topic_passes(tmp_path) -> None:
    ck = checkpoint(tmp_path, [kafka(orders={0: 3, 1: 9})], [kafka(orders={0: 5, 1: 12})])
    start = check_checkpoint(ck, MODEL)
    assert start is not None and start.last_committed_batch == 1
    assert new_partitions(start, MODEL) == {} == unordered_partitions(start, MODEL)
    assert check_checkpoint(str(tmp_path / "fresh"), MODEL) is None  # no checkpoint yet
    # Spark goes on from a committed batch (the runtime looks up no group position for it)
    assert has_committed_batch(ck) and not has_committed_batch(str(tmp_path / "fresh"))
    in_flight = checkpoint(tmp_path / "b", [kafka(orders={0: 3, 1: 9})], committed=-1)
    assert not has_committed_batch(in_flight)


def test_several_sources_or_a_source_not_kafka_are_refused(tmp_path) -> None:
    two = read_checkpoint(
        checkpoint(tmp_path / "a", [kafka(orders={0: 1, 1: 1}), kafka(orders={0: 1, 1: 1})])
    )
    assert "has 2 sources" in (check_sources(two, MODEL) or "")
    files = read_checkpoint(checkpoint(tmp_path / "b", ['{"logOffset":4}']))
    text = check_sources(files, MODEL) or ""
    assert "not Spark's Kafka source" in text and "logOffset" in text
    assert check_sources(read_checkpoint(checkpoint(tmp_path / "c", [kafka(orders={0: 1})])),
                         MODEL) is None  # fmt: skip


def test_topics_the_job_model_does_not_read_are_refused(tmp_path) -> None:
    # a subscribe of two topics (or a pattern that matched two): one source, two topics
    both = read_checkpoint(checkpoint(tmp_path, [kafka(orders={0: 2, 1: 0}, payments={0: 4})]))
    text = check_topics(both, MODEL) or ""
    assert "payments" in text and "job model v1" in text and "subscribePattern" in text
    two_streams = JobModel.initial("orders-counter", {"orders": 2, "payments": 1})
    assert check_topics(both, two_streams) is None


def test_partitions_the_job_model_lacks_are_refused_and_fewer_are_handled(tmp_path, caplog) -> None:
    ahead = read_checkpoint(checkpoint(tmp_path / "a", [kafka(orders={0: 2, 1: 9, 2: 4, 3: 0})]))
    text = check_partitions(ahead, MODEL) or ""
    assert "partitions 2, 3" in text and "reads 0-1" in text and "grew outside" in text
    behind = read_checkpoint(checkpoint(tmp_path / "b", [kafka(orders={0: 2, 1: 9})]))
    expanded = plan_expansion(MODEL, {"orders": 2}, {"orders": 4}).new_job_model
    assert check_partitions(behind, expanded) is None
    assert new_partitions(behind, expanded) == {"orders": [2, 3]}  # from their log start
    assert unordered_partitions(behind, expanded) == {}  # an expansion's: its barrier ordered them
    # v1 over a topic grown after the old job last read it, and a second stream: both handled,
    # the grown partitions with a warning (keys moved with no barrier)
    grown = JobModel.initial("orders-counter", {"orders": 4, "payments": 1})
    assert check_partitions(behind, grown) is None
    assert new_partitions(behind, grown) == {"orders": [2, 3], "payments": [0]}
    assert unordered_partitions(behind, grown) == {"orders": [2, 3]}
    with caplog.at_level(logging.INFO, "airflow_samza_expand.spark.runtime"):
        log_start(behind, grown)
    assert [r.levelname for r in caplog.records] == ["INFO", "WARNING"]
    assert "per-key order is at risk" in caplog.records[1].getMessage()


def test_a_batch_in_flight_is_checked_too(tmp_path) -> None:
    """Spark runs a batch in flight again on its recorded offsets: a partition it reads first
    (the topic grew while the old job ran) counts as read."""
    ck = checkpoint(tmp_path, [kafka(orders={0: 2, 1: 9})], [kafka(orders={0: 3, 1: 9, 2: 1})],
                    committed=0)  # fmt: skip
    with pytest.raises(CheckpointRefused, match=r"batch 1, in flight.*partitions 2 "):
        check_checkpoint(ck, MODEL)


def test_source_evolution_recorded_in_the_offset_log_is_refused(tmp_path) -> None:
    conf = {**CONF, "spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"}
    on = read_checkpoint(checkpoint(tmp_path / "a", [kafka(orders={0: 1})], conf=conf))
    text = check_source_evolution(on, MODEL) or ""
    assert "enableSourceEvolution=true" in text and "unnamed" in text
    off = read_checkpoint(checkpoint(tmp_path / "b", [kafka(orders={0: 1})]))
    assert check_source_evolution(off, MODEL) is None


def test_every_problem_is_named_in_one_refusal(tmp_path) -> None:
    conf = {**CONF, "spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"}
    ck = checkpoint(tmp_path, [kafka(orders={0: 1, 1: 1, 2: 1}, payments={0: 1})], conf=conf)
    with pytest.raises(CheckpointRefused) as refused:
        check_checkpoint(ck, MODEL)
    text = str(refused.value)
    assert "payments" in text and "partitions 2 " in text and "enableSourceEvolution" in text
    assert "init-job" in text  # the fix


def test_an_unreadable_offset_log_is_refused(tmp_path) -> None:
    ck = checkpoint(tmp_path, [kafka(orders={0: 1, 1: 1})])
    (tmp_path / "offsets" / "0").write_text("garbage")
    with pytest.raises(CheckpointRefused, match="not a Spark offset log"):
        check_checkpoint(ck, MODEL)


def test_a_checkpoint_this_process_cannot_read_starts_without_the_checks(caplog) -> None:
    """No fsspec backend (or credentials) here for the checkpoint's URL: Spark may still reach
    it, so the job starts as before, with a warning, and looks up its group's position."""
    url = "nosuchfs://bucket/orders-counter/checkpoint"
    assert check_checkpoint(url, MODEL) is None and not has_committed_batch(url)
    assert "cannot be read here" in caplog.text
