"""A checkpoint written by real Spark: its position as `_protocol.job.spark_checkpoint` reads it,
and `samza-expand init-job --from-checkpoint` moving the job (the last committed batch's offsets
into the job's group, job model v1) or refusing it with nothing written (a batch in flight only, a
source that is not Kafka, other topics or partitions, a query that still writes batches). One module
fixture runs two small queries once: a stateful count on Spark's own Kafka source (three batches)
and a union of that source with a file source; each test works on a copy."""

from __future__ import annotations

import json
import logging
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import create_topic, new_topic_name, produce_sequenced

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand._protocol.job.spark_checkpoint import (
    SOURCE_EVOLUTION_CONF,
    CheckpointError,
    read_checkpoint,
)
from airflow_samza_expand.cli import main
from airflow_samza_expand.store import open_store

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

KEYS = [f"key-{i}" for i in range(20)]
PER_KEY = 5  # 100 records, 40 a batch: batches 0, 1, 2


@dataclass(frozen=True)
class Written:
    topic: str
    kafka_only: Path  # the stateful count's checkpoint
    union: Path  # Kafka source + file source
    query_id: str
    ends: dict[int, dict[str, dict[int, int]]]  # batch -> the end offsets Spark reported


def _ends(progress: list[dict]) -> dict[int, dict[str, dict[int, int]]]:
    ends = {}
    for report in progress:
        if report["numInputRows"]:
            end = json.loads(report["sources"][0]["endOffset"])
            ends[report["batchId"]] = {
                t: {int(p): o for p, o in ps.items()} for t, ps in end.items()
            }
    return ends


@pytest.fixture(scope="module")
def written(spark, kafka_bootstrap, tmp_path_factory) -> Written:
    if "spark-sql-kafka" not in (spark.conf.get("spark.jars", "") or ""):
        pytest.skip("Spark's Kafka connector is not fetched (scripts/setup.sh, needs Maven)")
    root = tmp_path_factory.mktemp("spark-checkpoints")
    topic = new_topic_name("ckpt")
    create_topic(kafka_bootstrap, topic, 2)
    produce_sequenced(kafka_bootstrap, topic, KEYS, PER_KEY)
    source = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 40)
        .load()
    )
    query = (
        source.groupBy("key").count().writeStream.format("noop").outputMode("update")
        .option("checkpointLocation", str(root / "kafka-only"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination(180)
    assert query.exception() is None
    ends, query_id = _ends(query.recentProgress), str(query.id)
    files = root / "json-in"
    files.mkdir()
    (files / "a.json").write_text('{"key": "from-a-file"}\n')
    keys = source.selectExpr("CAST(key AS STRING) AS key").union(
        spark.readStream.schema("key STRING").json(str(files))
    )
    union = (
        keys.writeStream.format("noop").option("checkpointLocation", str(root / "union"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    union.awaitTermination(180)
    assert union.exception() is None
    return Written(topic, root / "kafka-only", root / "union", query_id, ends)


def _copy(source: Path, tmp_path: Path, *, drop_commits: tuple[int, ...] = ()) -> Path:
    target = tmp_path / "checkpoint"
    shutil.copytree(source, target)
    for batch in drop_commits:
        (target / "commits" / str(batch)).unlink()
    return target


def _init(capsys, bootstrap: str, job: str, topic: str, checkpoint: Any, *argv: str):
    code = main(["init-job", "--bootstrap-servers", bootstrap, "--job-name", job, "--topic", topic,
                 "--from-checkpoint", str(checkpoint), "--quiet-s", "0", *argv])  # fmt: skip
    out, err = capsys.readouterr()
    return code, out, err


def _nothing_written(bootstrap: str, job: str, topic: str, held: Any = None) -> None:
    """No coordinator topic; the job's group holds what it held (`held`, default nothing)."""
    from airflow_samza_expand.store import coordinator_topic

    with KafkaAdmin(client_config(bootstrap), timeout_s=15) as admin:
        assert coordinator_topic(job) not in admin.topic_names()
        held = held or {topic: {0: None, 1: None}}
        assert admin.group_offsets(job, {topic: [0, 1]}) == held


def test_reads_the_position_spark_wrote(written, kafka_bootstrap, tmp_path):
    """The last committed batch's offsets are what Spark reported for it, which is the topic's
    end (everything read); the offset log's conf; the same through an fsspec URL."""
    assert sorted(written.ends) == [0, 1, 2]
    checkpoint = read_checkpoint(str(_copy(written.kafka_only, tmp_path)))
    assert (checkpoint.last_committed_batch, checkpoint.newest_offsets_batch) == (2, 2)
    assert not checkpoint.in_flight and checkpoint.query_id == written.query_id
    assert [s.kind for s in checkpoint.offsets] == ["kafka"]
    assert checkpoint.kafka_topics() == (written.topic,)
    assert checkpoint.kafka_position() == written.ends[2]
    with KafkaAdmin(client_config(kafka_bootstrap), timeout_s=15) as admin:
        assert written.ends[2] == admin.high_watermarks({written.topic: [0, 1]})
    assert checkpoint.conf["spark.sql.shuffle.partitions"] == "2"
    assert checkpoint.conf[SOURCE_EVOLUTION_CONF] == "false"  # Spark 4.2 records the setting
    url = read_checkpoint("file://" + str(tmp_path / "checkpoint"))
    assert url.kafka_position() == written.ends[2]
    assert url.last_committed_batch == 2
    import fsspec  # an fsspec URL (as a cloud store's) reads the same

    memory = fsspec.filesystem("memory")
    memory.put(str(tmp_path / "checkpoint"), f"/{tmp_path.name}", recursive=True)
    remote = read_checkpoint(f"memory://{tmp_path.name}")
    assert remote.kafka_position() == written.ends[2] and remote.last_committed_batch == 2
    assert remote.query_id == written.query_id


def test_a_batch_in_flight_is_not_the_position(written, tmp_path):
    """offsets/2 without commits/2: batch 2 was in flight; the position is batch 1's end."""
    checkpoint = read_checkpoint(str(_copy(written.kafka_only, tmp_path, drop_commits=(2,))))
    assert (checkpoint.last_committed_batch, checkpoint.newest_offsets_batch) == (1, 2)
    assert checkpoint.in_flight
    assert checkpoint.kafka_position() == written.ends[1] != written.ends[2]


def test_only_a_batch_in_flight_has_no_position(written, tmp_path):
    checkpoint = read_checkpoint(str(_copy(written.kafka_only, tmp_path, drop_commits=(0, 1, 2))))
    assert (checkpoint.last_committed_batch, checkpoint.newest_offsets_batch) == (None, 2)
    assert checkpoint.offsets == ()
    with pytest.raises(CheckpointError, match="has no committed batch: batch 2 has offsets"):
        checkpoint.kafka_position()


def test_a_file_source_is_kept_raw(written):
    checkpoint = read_checkpoint(str(written.union))
    kafka, other = checkpoint.offsets
    assert kafka.kind == "kafka" and kafka.kafka == written.ends[2]
    assert other.kind == "other" and json.loads(other.raw) == {"logOffset": 0}


def test_init_job_from_checkpoint_takes_the_last_committed_batch(
    written, kafka_bootstrap, tmp_path, capsys
):
    """With batch 2 in flight: v1 (one task per partition) and the job's group at batch 1's end,
    exactly; a rerun is idempotent."""
    checkpoint = _copy(written.kafka_only, tmp_path, drop_commits=(2,))
    job = new_topic_name("moved")
    code, out, err = _init(capsys, kafka_bootstrap, job, written.topic, checkpoint)
    assert (code, err) == (0, "")
    assert f"position of checkpoint {checkpoint} (batch 1) copied into group {job}" in out
    with KafkaAdmin(client_config(kafka_bootstrap), timeout_s=15) as admin:
        held = admin.group_offsets(job, {written.topic: [0, 1]})
    assert held == written.ends[1]
    with open_store("kafka", job, client_config(kafka_bootstrap)) as store:
        model = store.latest_job_model()
    assert model is not None and model.version == 1
    assert model.partition_counts() == {written.topic: 2} and len(model.task_to_ssps()) == 2
    code, out, err = _init(capsys, kafka_bootstrap, job, written.topic, checkpoint)
    assert (code, err) == (0, "") and "already there, same content" in out


@pytest.mark.parametrize(
    "case", ["in-flight-only", "other-topic", "file-source", "partition", "group-holds"]
)
def test_init_job_from_checkpoint_refusals_write_nothing(
    written, kafka_bootstrap, tmp_path, capsys, case
):
    job, topic = new_topic_name("refused"), written.topic
    checkpoint = _copy(written.union if case == "file-source" else written.kafka_only, tmp_path,
                       drop_commits=(0, 1, 2) if case == "in-flight-only" else ())  # fmt: skip
    if case == "other-topic":
        topic = new_topic_name("other")
        create_topic(kafka_bootstrap, topic, 2)
    if case == "partition":  # the topic grew after the old job stopped: partition 1 is missing
        log = checkpoint / "offsets" / "2"
        lines = log.read_text().split("\n")
        lines[2] = json.dumps({written.topic: {"0": written.ends[2][written.topic][0]}})
        log.write_text("\n".join(lines))
    held = {topic: {0: 1, 1: 1}} if case == "group-holds" else {topic: {0: None, 1: None}}
    if case == "group-holds":  # the job's group holds another position (the job ran already)
        with KafkaAdmin(client_config(kafka_bootstrap), timeout_s=15) as admin:
            admin.commit_group_offsets(job, held)
    code, out, err = _init(capsys, kafka_bootstrap, job, topic, checkpoint)
    assert (code, out) == (2, "")
    assert "nothing written" in err
    expected = {
        "in-flight-only": "has no committed batch: batch 2 has offsets but no commits/2",
        "other-topic": f"reads topic(s) [{written.topic!r}], not the --topic given [{topic!r}]",
        "file-source": "source 1: not Kafka '{\"logOffset\":0}' - --from-checkpoint takes",
        "partition": f"holds partitions [0] of {written.topic!r}, which has 2 today",
        "group-holds": f"the job's consumer group {job!r} already holds a position",
    }[case]
    assert expected in err
    _nothing_written(kafka_bootstrap, job, topic, held)


class _Watching(logging.Handler):
    """Sets `seen` when init-job starts watching the checkpoint for a newer batch."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "watching" in record.getMessage():
            self.seen.set()


def test_init_job_refuses_a_checkpoint_a_query_still_writes(
    written, kafka_bootstrap, tmp_path, capsys
):
    """While init-job watches (--quiet-s), batch 3 is logged, as a running query does:
    refused, nothing written."""
    checkpoint = _copy(written.kafka_only, tmp_path)
    job = new_topic_name("running")
    logger = logging.getLogger("airflow_samza_expand._protocol.cli.init_adopt")
    watching, level = _Watching(), logger.level
    logger.addHandler(watching)
    logger.setLevel(logging.INFO)

    def next_batch() -> None:  # what Spark writes when it starts batch 3
        if watching.seen.wait(120):
            shutil.copyfile(checkpoint / "offsets" / "2", checkpoint / "offsets" / ".3.tmp")
            (checkpoint / "offsets" / ".3.tmp").rename(checkpoint / "offsets" / "3")

    writer = threading.Thread(target=next_batch, daemon=True)
    writer.start()
    try:
        code = main(["init-job", "--bootstrap-servers", kafka_bootstrap, "--job-name", job,
                     "--topic", written.topic, "--from-checkpoint", str(checkpoint),
                     "--quiet-s", "120"])  # fmt: skip
    finally:
        watching.seen.set()
        writer.join(30)
        logger.removeHandler(watching)
        logger.setLevel(level)
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert f"checkpoint {str(checkpoint)!r} is still written: batch 3 appeared" in err
    assert "a query still runs on it; nothing written. Stop the old job" in err
    _nothing_written(kafka_bootstrap, job, written.topic)
