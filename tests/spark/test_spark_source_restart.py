"""The reader's batched watermark reads (one ListOffsets per leader broker and kind) right after
Apache Kafka restarted on its data directory, with the reader's client from before the restart:
the restarted broker answers that client's cached leader epochs as fenced for as long as the
client lives, so the read asks again through a new client - as it does every answer Kafka marks
retriable - until its timeout, never failing the job's batch. Driven directly, no Spark
(docs/internals.md 'Expansion cost by size')."""

from __future__ import annotations

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable
from spark_helpers import create_topic, new_topic_name, produce_sequenced

from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.spark._source import SOURCE_SCHEMA, SamzaKafkaStreamReader

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

PARTITIONS = 16
KEYS = [f"key-{i}" for i in range(40)]


def test_the_batched_watermark_reads_ride_out_a_broker_restart(restartable_apache_kafka, caplog):
    broker = restartable_apache_kafka
    topic = new_topic_name("orders")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    produce_sequenced(broker.bootstrap, topic, KEYS, 5)
    model = JobModel.initial("restart-job", {topic: PARTITIONS})
    reader = SamzaKafkaStreamReader(
        SOURCE_SCHEMA, {"job_model": model.to_json(), "bootstrap_servers": broker.bootstrap}
    )
    try:
        start = reader.initialOffset()
        before = reader._watermarks()
        assert sum(high for _low, high in before.values()) == len(KEYS) * 5
        broker.restart()  # SIGTERM, then the same ports and data directory
        # the reader's client connects to the restarted broker again holding the leader epochs
        # it cached before (ListGroups asks for no topic's metadata); without it the first read
        # may find the connection still down and take a new client anyway
        reader._admin.consumer_group_ids()
        with caplog.at_level("INFO", logger="airflow_samza_expand._kafka.admin"):
            after = reader._watermarks()
            end = reader.latestOffset(start, ReadAllAvailable())
    finally:
        reader.stop()
    assert after == before
    assert end == {topic: {str(p): before[(topic, p)][1] for p in range(PARTITIONS)}}
    assert "Leader epoch is older than broker epoch" in caplog.text  # fenced, and asked again
