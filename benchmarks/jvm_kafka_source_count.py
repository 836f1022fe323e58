"""The yardstick of benchmarks/job_throughput.py, run by spark-submit with Spark's own Kafka
source (spark-sql-kafka-0-10) on the jars option: the same stateful count as the shipped job
(``applyInPandasWithState`` of the default processor keyed by ``(task, key)``, tasks as the job
model v1 of the topic groups them), read with the JVM source instead of our Python data source,
available-now, outputs written to Kafka. Prints one JSON line with the per-batch progress.

    spark-submit --jars <spark-sql-kafka jars> jvm_kafka_source_count.py BOOTSTRAP TOPIC
        PARTITIONS OUTPUT_TOPIC CHECKPOINT_DIR MAX_RECORDS_PER_BATCH STATE_BUCKETS
        [COORDINATOR_DIR JOB_NAME]

With COORDINATOR_DIR and JOB_NAME the same query runs on the runtime (``spark.runtime``:
attach with the active lease, ``read_kafka()`` over job model v1 in that file store, ``run``
with its group commits and heartbeats) instead of a bare ``subscribe`` query.

STATE_BUCKETS as the job's ``--state-buckets`` (0: one state row per key; N: keys hashed into
N buckets per task, ``pmod(xxhash64(key), N)``), so both sides keep the same state layout.
"""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    from airflow_samza_expand.spark._processor import DEFAULT_PROCESSOR
    from airflow_samza_expand.spark._state import OUTPUT_SCHEMA, STATE_SCHEMA, StatefulFunction

    bootstrap, topic, partitions, output, checkpoint, cap, buckets_arg = argv[:7]
    buckets = int(buckets_arg)
    spark = SparkSession.builder.appName("samza-expand-bench-jvm-kafka-source").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    job = None
    if len(argv) == 9:  # on the runtime
        from airflow_samza_expand.spark import runtime

        job = runtime.attach(spark, ["--job-name", argv[8], "--coordinator", argv[7],
                                     "--bootstrap-servers", bootstrap, "--checkpoint-dir",
                                     checkpoint, "--max-records-per-batch", cap])  # fmt: skip
        source = job.read_kafka()
        task = F.col("task")
    else:
        source = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", cap)
            .load()
        )
        task = F.concat(F.lit("Partition "), (F.col("partition") % int(partitions)).cast("string"))
    records = (
        source.select(
            task.alias("task"),
            "topic",
            "partition",
            "offset",
            F.col("key").cast("string").alias("key"),
            "value",
            "timestamp",
        )  # fmt: skip
    )
    if buckets:
        records = records.withColumn("bucket", F.pmod(F.xxhash64("key"), F.lit(buckets)))
    outputs = records.groupBy("task", "bucket" if buckets else "key").applyInPandasWithState(
        StatefulFunction(DEFAULT_PROCESSOR, buckets),
        OUTPUT_SCHEMA,
        STATE_SCHEMA,
        "Update",
        GroupStateTimeout.NoTimeout,
    )

    def write(batch_df, batch_id: int) -> None:
        (
            batch_df.select("key", F.to_json(F.struct("*")).alias("value"))
            .write.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", output)
            .save()
        )

    query = (
        outputs.writeStream.foreachBatch(write)
        .outputMode("update")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    if job is not None:
        assert job.run(query) == 0
    else:
        query.awaitTermination()
    batches = [
        {
            "batchId": p["batchId"],
            "numInputRows": p["numInputRows"],
            "timestamp": p["timestamp"],
            "triggerExecution": p["durationMs"].get("triggerExecution", 0),
        }
        for p in (json.loads(progress.json) for progress in query.recentProgress)
        if p["numInputRows"]
    ]
    print("JVM_SOURCE_RESULT " + json.dumps({"batches": batches}), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
