"""An example stateful PySpark job of the usual shape, expanded by the DAG through the runtime.

It counts records per record key and checks each key's producer sequence number (values are
JSON ``{"key": k, "seq": n}``, ``n`` = 0, 1, 2 ... per key, as ``_demo.producer`` writes them):
Spark's own Kafka source, state in ``applyInPandasWithState`` keyed by the record key, results
``{"key", "count", "violations", "last_seq", "task"}`` written to a Kafka topic (what
``_demo.verify`` checks). Run it with spark-submit and Spark's Kafka connector::

    spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version> \\
        user_job.py --job-name orders-counter --bootstrap-servers kafka:9092 \\
        --checkpoint-dir /checkpoints/orders-counter --output-topic counts

**Why its state survives the growth.** Spark keeps the state of ``groupBy("key")`` in the
state store of the shuffle partition ``hash(key) % spark.sql.shuffle.partitions``, and that
number is fixed in the checkpoint. Growing the input topic changes which *Kafka* partition a
key arrives on, never which *state* partition holds it: the restarted query finds every key's
count where it left it.

**What the runtime adds** (``runtime.attach`` / ``read_kafka`` / ``run``, three lines): the job
reads exactly the partitions of its job model (``assign``), so the partitions an expansion
adds wait until the barrier proved the old ones drained (a moved key's old records are counted
before its new ones: per-key order); a partition new to the checkpoint starts at its log start;
the processed offsets are committed to the group ``<job>`` for the barrier, under the active
lease (never two instances); a stop record ends it cleanly for the orchestrated restart, a
``--standby`` launch waits warm; heartbeats tell the DAG what restart it can take. Handed the
function that starts the query (``job.run(start)``), the runtime restarts the query on the new
job model inside this application once the barrier has passed (in-app: nothing is launched by
Airflow, same checkpoint, lease, processor and Spark application); with ``--source python``
(the provider's reader) it switches in place without a restart.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from typing import Any

# spark-submit runs this file as a script: import the package from the checkout it lives in
# when it is not installed.
if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

OUTPUT_SCHEMA = "key string, count long, violations long, last_seq long, task string"
STATE_SCHEMA = "count long, last_seq long, violations long"
NO_SEQ = -1


def count_key(key: tuple, batches: Iterator[Any], state: Any) -> Iterator[Any]:
    """One key's micro-batch, in (partition, offset) order: count and check the sequence."""
    import pandas as pd

    count, last_seq, violations = state.get if state.exists else (0, NO_SEQ, 0)
    rows = pd.concat(list(batches)).sort_values(["partition", "offset"])
    for seq in rows["seq"]:
        count += 1
        if pd.isna(seq):
            continue
        if int(seq) != last_seq + 1:  # the first seq is 0 (last_seq starts at NO_SEQ = -1)
            violations += 1
        last_seq = int(seq)
    state.update((count, last_seq, violations))
    yield pd.DataFrame(
        [
            {
                "key": key[0],
                "count": count,
                "violations": violations,
                "last_seq": None if last_seq == NO_SEQ else last_seq,
                "task": rows["task"].iat[-1],
            }
        ]
    )


def keyed_counts(records: Any) -> Any:
    """The job's logic over Kafka records (with a ``task`` column): per record key, its count
    and sequence check in Spark's state, as ``key``/``value`` (JSON) rows for a Kafka sink."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    counts = (
        records.select(
            F.col("key").cast("string").alias("key"),
            F.get_json_object(F.col("value").cast("string"), "$.seq").cast("long").alias("seq"),
            "partition",
            "offset",
            "task",
        )
        .groupBy("key")
        .applyInPandasWithState(
            count_key, OUTPUT_SCHEMA, STATE_SCHEMA, "Update", GroupStateTimeout.NoTimeout
        )
    )
    return counts.select("key", F.to_json(F.struct("*")).alias("value"))


def main(argv: list[str] | None = None) -> int:
    from pyspark.sql import SparkSession

    from airflow_samza_expand.spark import runtime

    spark = SparkSession.builder.appName("user-job-keyed-count").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    job = runtime.attach(spark, argv)  # the DAG's command line: job name, Kafka, checkpoint ...
    own = argparse.ArgumentParser(prog="user_job.py")
    own.add_argument("--source", choices=("kafka", "python"), default="kafka")
    own.add_argument("--shuffle-partitions", type=int, default=4)  # fixed by the checkpoint
    # hand job.run the started query instead: the job can then only be restarted (warm, or by
    # the DAG's restart task) - the form of a job you have not changed yet
    own.add_argument("--restart-only", action="store_true")
    mine, _ = own.parse_known_args(job.extra_args)
    spark.conf.set("spark.sql.shuffle.partitions", str(mine.shuffle_partitions))

    def start() -> Any:
        """Start the query on the job model in force (the runtime calls it again on vN+1)."""
        records = job.read_kafka(source=mine.source)  # job model's partitions, + `task`
        return (
            keyed_counts(records)
            .writeStream.format("kafka")
            .options(**job.spark_kafka_options())
            .option("topic", job.output_topic)
            .option("checkpointLocation", job.checkpoint_dir)
            .outputMode("update")
            .trigger(**job.trigger)
            .start()
        )

    # the function, not the started query: the runtime restarts the query on a new job model
    # inside this application (in-app) - commits, stop records, lease; the exit code
    return job.run(start() if mine.restart_only else start)


if __name__ == "__main__":
    sys.exit(main())
