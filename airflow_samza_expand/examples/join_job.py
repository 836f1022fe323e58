"""An example user job that joins two streams by key on the runtime: ``orders`` and
``payments`` (SEP-5's join), their keys shared, their values JSON ``{"key": k, "seq": n}`` with
``n`` = 0, 1, 2 ... per key and stream (as ``_demo.producer`` writes them).

Payment ``n`` of a key meets order ``n`` of the same key: per key the state holds the orders and
payments seen and how many payments met their order (``joined``), and counts a record whose
``seq`` is not its stream's next one (lost, repeated or reordered, or the key's state lost) as a
violation. A record of a topic whose name ends with ``payments`` is a payment, any other an
order. Each micro-batch writes ``{"key", "count", "orders", "payments", "joined", "violations",
"task"}`` per key to the output topic (``count`` = orders + payments, what ``_demo.verify``
checks). Run it like ``user_job.py`` (spark-submit with Spark's Kafka connector)::

    spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version> \\
        join_job.py --job-name order-payments --bootstrap-servers kafka:9092 \\
        --checkpoint-dir /checkpoints/order-payments --output-topic joined

The join holds across growth for the reason ``user_job.py`` gives: Spark keeps the state of
``groupBy("key")`` in the shuffle partition of the key, fixed by the checkpoint, so an order
and a payment of one key meet in one state whatever Kafka partitions they came from. Handed
``job.run(start)``, the runtime restarts the query on each new job model in the same Spark
application once the barrier has passed (in-app).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any

if __package__ in (None, ""):  # run by spark-submit as a script: import from the checkout
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

JOIN_FIELDS = ("orders", "payments", "joined", "violations")
STATE_SCHEMA = ", ".join(f"{name} long" for name in JOIN_FIELDS)
OUTPUT_SCHEMA = f"key string, count long, {STATE_SCHEMA}, task string"


def join_step(
    state: tuple[int, int, int, int], records: Iterable[tuple[str, int | None]]
) -> tuple[int, int, int, int]:
    """One key's ``(topic, seq)`` records, each stream in its order, applied to its state
    ``(orders, payments, joined, violations)``."""
    orders, payments, joined, violations = state
    for topic, seq in records:
        if topic.endswith("payments"):
            violations += seq != payments
            payments += 1
        else:
            violations += seq != orders
            orders += 1
        joined = max(joined, min(orders, payments))  # payment n met order n once both came
    return orders, payments, joined, violations


def join_key(key: tuple, batches: Iterator[Any], state: Any) -> Iterator[Any]:
    """One key's micro-batch (applyInPandasWithState): each stream in (partition, offset)
    order."""
    import pandas as pd

    rows = pd.concat(list(batches)).sort_values(["topic", "partition", "offset"])
    seqs = [None if pd.isna(seq) else int(seq) for seq in rows["seq"]]
    new = join_step(
        state.get if state.exists else (0, 0, 0, 0), zip(rows["topic"], seqs, strict=True)
    )
    state.update(new)
    out = dict(zip(JOIN_FIELDS, new, strict=True))
    yield pd.DataFrame([{"key": key[0], "count": new[0] + new[1], **out,
                         "task": rows["task"].iat[-1]}])  # fmt: skip


def joined_by_key(records: Any) -> Any:
    """The join over Kafka records (with a ``task`` column), as ``key``/``value`` (JSON) rows."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    seq = F.get_json_object(F.col("value").cast("string"), "$.seq").cast("long")
    joined = (
        records.select(
            F.col("key").cast("string").alias("key"),
            seq.alias("seq"),
            "topic",
            "partition",
            "offset",
            "task",
        )  # fmt: skip
        .groupBy("key")
        .applyInPandasWithState(
            join_key, OUTPUT_SCHEMA, STATE_SCHEMA, "Update", GroupStateTimeout.NoTimeout
        )
    )
    return joined.select("key", F.to_json(F.struct("*")).alias("value"))


def main(argv: list[str] | None = None) -> int:
    from pyspark.sql import SparkSession

    from airflow_samza_expand.spark import runtime

    spark = SparkSession.builder.appName("user-job-order-payment-join").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.conf.set("spark.sql.shuffle.partitions", "4")  # fixed by the checkpoint
    job = runtime.attach(spark, argv)  # the DAG's command line: job name, Kafka, checkpoint ...

    def start() -> Any:
        """Start the query on the job model in force (the runtime calls it again on vN+1)."""
        return (
            joined_by_key(job.read_kafka(source="kafka"))
            .writeStream.format("kafka")
            .options(**job.spark_kafka_options())
            .option("topic", job.output_topic)
            .option("checkpointLocation", job.checkpoint_dir)
            .outputMode("update")
            .trigger(**job.trigger)
            .start()
        )

    return job.run(start)  # the function: restarted in-app on each new job model


if __name__ == "__main__":
    sys.exit(main())
