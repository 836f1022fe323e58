"""The standby's warm-up with the job's own pipeline: before it holds the
lease, a standby runs the stateful plan once - the same ``applyInPandasWithState`` operator,
state store provider, ``foreachBatch`` callback and ``mapInArrow`` output path - as a throwaway
available-now query over a few rows of a temporary file source with its own temporary
checkpoint. The first micro-batch of the real query then finds the JVM classes loaded and JIT
compiled, the generated code cached, the py4j callback server and the Python workers (with the
processor, pandas, Arrow and confluent-kafka imported) running. It reads no input topic,
writes no output and commits nothing."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger("airflow_samza_expand.spark._warmup")

WARM_UP_TIMEOUT_S = 300.0
WARM_UP_KEYS = 8


def stateful_outputs(records: Any, processor_spec: str, buckets: int, shards: int = 0) -> Any:
    """The job's stateful operator over ``records`` (the source's columns): one group per
    ``(task, key)``, per ``(task, bucket)`` with ``buckets``, per shard of ``(task, key)``
    with ``shards`` (`StatefulFunction`); the processor's outputs."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    from airflow_samza_expand.spark._state import OUTPUT_SCHEMA, STATE_SCHEMA, StatefulFunction

    if shards:
        records = records.withColumn("shard", F.pmod(F.xxhash64("task", "key"), F.lit(shards)))
        grouped = records.groupBy("shard")
    elif buckets:
        records = records.withColumn("bucket", F.pmod(F.xxhash64("key"), F.lit(buckets)))
        grouped = records.groupBy("task", "bucket")
    else:
        grouped = records.groupBy("task", "key")
    return grouped.applyInPandasWithState(
        StatefulFunction(processor_spec, buckets, shards),
        OUTPUT_SCHEMA,
        STATE_SCHEMA,
        "Update",
        GroupStateTimeout.NoTimeout,
    )


def _discard(batches: Iterator[Any]) -> Iterator[Any]:
    """The output path's executor side without producing: Arrow in, the summary out."""
    import pyarrow as pa

    tasks: dict[str, int] = {}
    for batch in batches:
        cols = batch.to_pydict()
        for task, records in zip(cols["task"], cols["records"], strict=True):
            tasks[task] = tasks.get(task, 0) + (records or 0)
    names = sorted(tasks)
    yield pa.RecordBatch.from_pydict(
        {"task": names, "records": [tasks[t] for t in names], "outputs": [0] * len(names)},
        schema=pa.schema([("task", pa.string()), ("records", pa.int64()), ("outputs", pa.int64())]),
    )


def warm_up_pipeline(spark: Any, processor_spec: str, buckets: int = 0, shards: int = 0) -> float:
    """Run the stateful plan once on a few throwaway rows (module docstring); the seconds it
    took. A failure is logged, never raised: a cold first batch is slower, not wrong."""
    import json

    from airflow_samza_expand.spark._outputs import SUMMARY_SCHEMA
    from airflow_samza_expand.spark._source import SOURCE_SCHEMA

    started = time.monotonic()
    work = tempfile.mkdtemp(prefix="samza-expand-warmup-")
    try:
        now = datetime.now(UTC)
        rows = [
            ("Partition 0", "warm-up", 0, i, f"k{i % WARM_UP_KEYS}",
             json.dumps({"seq": i // WARM_UP_KEYS}).encode(), now)
            for i in range(4 * WARM_UP_KEYS)
        ]  # fmt: skip
        source = os.path.join(work, "input")
        spark.createDataFrame(rows, SOURCE_SCHEMA).coalesce(1).write.parquet(source)
        records = spark.readStream.schema(SOURCE_SCHEMA).parquet(source)
        outputs = stateful_outputs(records, processor_spec, buckets, shards)

        def each(batch_df: Any, _batch_id: int) -> None:
            batch_df.mapInArrow(_discard, SUMMARY_SCHEMA).collect()

        query = (
            outputs.writeStream.foreachBatch(each)
            .outputMode("update")
            .option("checkpointLocation", os.path.join(work, "checkpoint"))
            .trigger(availableNow=True)
            .queryName("samza_expand_warm_up")
            .start()
        )
        try:
            query.awaitTermination(WARM_UP_TIMEOUT_S)
            error = query.exception()
            if error is not None:
                log.warning("warm-up query failed (the first batch will be colder): %s", error)
        finally:
            if query.isActive:
                query.stop()
    except Exception as exc:  # noqa: BLE001 - warming is best effort
        log.warning("warm-up query not run (the first batch will be colder): %s", exc)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    took = time.monotonic() - started
    log.info("warm-up query of the stateful plan took %.1f s", took)
    return took


def warm_up_source(spark: Any, register: Any, options: dict[str, str]) -> float:
    """Register the job's Python data source (`register`, once per session) and load a
    streaming DataFrame from it with `options`, without starting a query: the registration and
    the schema lookup in a Python planner worker (about 1.8 s of a cold query start) are done
    before the lease. It reads no record. A failure is logged, never raised."""
    from airflow_samza_expand.spark._source import SamzaKafkaDataSource

    started = time.monotonic()
    try:
        register()
        spark.readStream.format(SamzaKafkaDataSource.name()).options(**options).load()
    except Exception as exc:  # noqa: BLE001 - warming is best effort
        log.warning("data source not warmed up (the query start will be slower): %s", exc)
    took = time.monotonic() - started
    log.info("warm-up of the Kafka data source took %.1f s", took)
    return took


__all__ = ["stateful_outputs", "warm_up_pipeline", "warm_up_source"]
