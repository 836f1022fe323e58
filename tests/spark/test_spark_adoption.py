"""A job that moves onto the runtime keeping its checkpoint is checked before it processes
anything (`spark._adoption`, real Spark and Kafka): the plain job (`examples/plain_job.py`)
subscribed to two topics, the job model reads one - the runtime refuses at start (exit 2, the
case and the fix on stderr) with the checkpoint, the outputs and the group untouched. Without
the check Spark starts the query, writes the next batch's offsets into the checkpoint and fails
with "partitions ... have been deleted" (exit 1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from spark_helpers import committed, create_topic, produce_sequenced, read_latest_outputs
from test_spark_runtime import UserJob, _spark_kafka

from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.examples import plain_job

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def _logs(checkpoint: str) -> dict[str, list[str]]:
    return {d: sorted(p.name for p in (Path(checkpoint) / d).iterdir())
            for d in ("offsets", "commits")}  # fmt: skip


def test_a_checkpoint_of_a_subscribe_to_two_topics_is_refused_before_processing(
    spark, kafka_bootstrap, unique_topic, tmp_path, capsys
) -> None:
    _spark_kafka(spark)
    job = UserJob(spark, kafka_bootstrap, unique_topic, tmp_path, "kafka")
    payments = unique_topic("upay")
    create_topic(kafka_bootstrap, payments, 1)
    keys = [f"key-{i}" for i in range(8)]
    seqs = produce_sequenced(kafka_bootstrap, job.topic, keys, 5)
    produce_sequenced(kafka_bootstrap, payments, ["pay-0"], 3)
    old = plain_job.parse([
        "--bootstrap-servers", kafka_bootstrap, "--topic", job.topic, "--topic", payments,
        "--checkpoint-dir", job.checkpoint, "--output-topic", job.output,
    ])  # fmt: skip
    query = plain_job.start(spark, old)
    query.processAllAvailable()
    query.stop()
    before = _logs(job.checkpoint), read_latest_outputs(kafka_bootstrap, job.output)
    assert {k: v["count"] for k, v in before[1].items()} == {**dict.fromkeys(keys, 5), "pay-0": 3}
    produce_sequenced(kafka_bootstrap, job.topic, keys, 2, first_seq=seqs)  # arrived since
    job.store.write_job_model(JobModel.initial(job.name, {job.topic: 2}))  # one of the topics
    with pytest.raises(SystemExit) as exited:
        job.run()
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"reads topic(s) {payments} that job model v1" in err, err
    assert "init-job" in err
    # nothing processed: no batch planned or committed, no output, no group commit
    assert (_logs(job.checkpoint), read_latest_outputs(kafka_bootstrap, job.output)) == before
    assert all(o < 0 for o in committed(kafka_bootstrap, job.name, job.topic, 2).values())
    assert job.store.processors()["user-1"]["state"] == "failed"
