"""The example job before it moved onto the runtime: a plain stateful PySpark job on Spark's own
Kafka source (``subscribe``, its own checkpoint), with the logic of ``user_job.py``::

    spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version> \\
        plain_job.py --bootstrap-servers kafka:9092 --topic orders \\
        --checkpoint-dir /checkpoints/orders-counter --output-topic counts

**Moving it onto the runtime with its state**: stop it, write job model v1 (``samza-expand
init-job --job-name orders-counter --topic orders ...``) and start ``user_job.py`` on the SAME
``--checkpoint-dir``. The only change is the source (``job.read_kafka()``: ``assign`` of the job
model's partitions instead of ``subscribe``) and ``job.run(start)``; Spark restores every
key's state and every partition's offset from the checkpoint. Before its first query the
runtime checks that the checkpoint fits the job model (one Kafka source on the job model's
topics, no partition the job model lacks) and refuses it otherwise (exit 2).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

if __package__ in (None, ""):  # spark-submit runs this file as a script
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from airflow_samza_expand.examples.user_job import keyed_counts  # noqa: E402


def start(spark: Any, args: argparse.Namespace) -> Any:
    """Start the plain query: ``subscribe`` to the topics, the example's keyed counts."""
    from pyspark.sql import functions as F

    records = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap_servers)
        .option("subscribe", ",".join(args.topic))
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
        .load()
        .withColumn("task", F.lit(None).cast("string"))  # no job model: no task
    )
    return (
        keyed_counts(records)
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap_servers)
        .option("topic", args.output_topic)
        .option("checkpointLocation", args.checkpoint_dir)
        .outputMode("update")
        .trigger(processingTime=args.trigger_interval)
        .start()
    )


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="plain_job.py", description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--topic", action="append", required=True, help="repeat for several")
    parser.add_argument("--checkpoint-dir", required=True)
    parser.add_argument("--output-topic", required=True)
    parser.add_argument("--trigger-interval", default="1 second")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=5000)
    parser.add_argument("--shuffle-partitions", type=int, default=4)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from pyspark.sql import SparkSession

    args = parse(argv)
    spark = SparkSession.builder.appName("plain-job-keyed-count").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.conf.set("spark.sql.shuffle.partitions", str(args.shuffle_partitions))
    start(spark, args).awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
