"""Entry point of the stateful PySpark job that honours the job model.

Run it as ``python -m airflow_samza_expand.spark.job ...`` or give this file to spark-submit /
``SparkSubmitOperator(application=...)``. Lifecycle:

1. read the newest job model from the coordinator store (refuse to start without one);
2. refuse a checkpoint written under an incompatible task set (`state.check_task_set`);
3. heartbeat ``starting``, then ``running`` with the job model version after every micro-batch;
4. after each micro-batch commit the batch's end offsets for the consumer group ``<job>``;
5. on a ``stop`` control record for its version (or a newer one): admit no more data, let the
   current micro-batch finish, commit, heartbeat ``stopped`` and exit 0.
   ``--trigger available-now`` also ends with ``stopped`` once the data present at start is done.

Exit codes: 0 done or stopped, 1 the query failed, 2 bad input (message on stderr).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

# Spark runs this file as a script (spark-submit / SparkSubmitOperator(application=...)):
# make the package importable from the checkout it lives in when it is not installed.
if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from airflow_samza_expand.core.errors import ExpansionError  # noqa: E402
from airflow_samza_expand.core.model import JobModel  # noqa: E402

log = logging.getLogger("airflow_samza_expand.spark.job")

IDLE_HEARTBEAT_S = 10.0
STOP_POLL_S = 1.0
POLL_S = 0.5
DEFAULT_MAX_RECORDS_PER_BATCH = 100_000
SUMMARY_SCHEMA = "task string, records long, outputs long"
_PROCESSING_TIME = re.compile(r"^processing-time=(\d+(?:\.\d+)?)\s*(ms|s|m)?$")


class UsageError(Exception):
    """Bad input: the message names the problem and the fix."""


# -- arguments ---------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    from airflow_samza_expand.spark.processor import DEFAULT_PROCESSOR

    p = argparse.ArgumentParser(
        prog="python -m airflow_samza_expand.spark.job",
        description="Stateful PySpark job reading Kafka by the tasks of its Samza-style job model.",
    )
    p.add_argument("--job-name", required=True, help="job name (also the consumer group)")
    p.add_argument("--bootstrap-servers", help="Kafka bootstrap servers host:port[,...]")
    p.add_argument("--kafka-config", metavar="FILE", help="librdkafka key=value config file")
    p.add_argument(
        "--coordinator",
        default="kafka",
        help="coordinator store: 'kafka', 'kafka://<topic>', a path or an fsspec URL",
    )
    p.add_argument("--checkpoint-dir", required=True, help="Spark checkpoint directory")
    p.add_argument("--output-topic", required=True, help="topic the processor outputs go to")
    p.add_argument(
        "--trigger",
        default="processing-time=5s",
        help="'available-now' or 'processing-time=<n>[ms|s|m]' (default processing-time=5s)",
    )
    p.add_argument("--processor-id", default=None, help="heartbeat id (default host-pid)")
    p.add_argument(
        "--max-records-per-batch",
        type=int,
        default=DEFAULT_MAX_RECORDS_PER_BATCH,
        help=f"cap of records per micro-batch, shared fairly by SSPs; 0 = no cap "
        f"(default {DEFAULT_MAX_RECORDS_PER_BATCH})",
    )
    p.add_argument(
        "--processor",
        default=DEFAULT_PROCESSOR,
        help=f"keyed processor as module:Class (default {DEFAULT_PROCESSOR})",
    )
    p.add_argument(
        "--allow-task-change",
        action="store_true",
        help="accept a checkpoint written under another task set (keyed state may be lost)",
    )
    p.add_argument(
        "--master", default=None, help="Spark master when not run by spark-submit (local[2])"
    )
    p.add_argument(
        "--shuffle-partitions",
        type=int,
        default=4,
        help="state partitions of a new checkpoint (fixed once the checkpoint exists)",
    )
    p.add_argument(
        "--state-buckets",
        type=int,
        default=0,
        help="0: one Spark state row per (task, key); N: per (task, hash(key) %% N) holding "
        "its keys' states - far fewer Python calls per batch (fixed once the checkpoint exists)",
    )
    p.add_argument(
        "--progress-file",
        default=None,
        metavar="FILE",
        help="append each batch's Spark progress (durations, rows) as a JSON line",
    )
    p.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark setting (repeatable) when run without spark-submit",
    )
    from airflow_samza_expand.spark.stale import add_arguments

    add_arguments(p)  # --barrier-offsets, --partitioner, --on-stale-placement (rule 1.5)
    return p


def parse_trigger(text: str) -> dict[str, Any]:
    """``available-now`` -> {availableNow: True}; ``processing-time=5s`` -> {processingTime}."""
    if text == "available-now":
        return {"availableNow": True}
    match = _PROCESSING_TIME.match(text.strip())
    if not match:
        raise UsageError(
            f"trigger {text!r} is not understood - give 'available-now' or "
            "'processing-time=5s' (units ms, s, m)"
        )
    amount, unit = match.group(1), match.group(2) or "s"
    words = {"ms": "milliseconds", "s": "seconds", "m": "minutes"}
    return {"processingTime": f"{amount} {words[unit]}"}


def validate_args(args: argparse.Namespace) -> None:
    if not args.bootstrap_servers and not args.kafka_config:
        raise UsageError("no Kafka given - pass --bootstrap-servers or --kafka-config FILE")
    if args.kafka_config and not os.path.isfile(args.kafka_config):
        raise UsageError(
            f"--kafka-config {args.kafka_config!r} is not a file - give a readable file"
        )
    if args.max_records_per_batch < 0:
        raise UsageError("--max-records-per-batch must be >= 0 (0 means no cap)")
    if args.state_buckets < 0:
        raise UsageError("--state-buckets must be >= 0 (0 means one state row per key)")
    if args.shuffle_partitions <= 0:
        raise UsageError("--shuffle-partitions must be >= 1")
    parse_trigger(args.trigger)
    for item in args.spark_conf:
        if "=" not in item:
            raise UsageError(f"--spark-conf {item!r} is not KEY=VALUE")
    from airflow_samza_expand.spark.processor import load_processor

    try:
        load_processor(args.processor)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


# -- output ------------------------------------------------------------------------------------


def _produce_outputs(
    kafka_options: Mapping[str, str], topic: str
) -> Any:  # returns the mapInArrow function
    """Executor function: produce processor outputs, yield per-task (records, outputs)."""

    def produce(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from confluent_kafka import Producer

        from airflow_samza_expand.spark.source import kafka_client_config

        config = kafka_client_config(kafka_options)
        config.setdefault("linger.ms", "5")
        producer = Producer(config)
        errors: list[str] = []

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(str(err))

        per_task: dict[str, list[int]] = {}
        for batch in batches:
            cols = batch.to_pydict()
            for task, key, records, value in zip(
                cols["task"], cols["key"], cols["records"], cols["value"], strict=True
            ):
                counts = per_task.setdefault(task, [0, 0])
                counts[0] += records or 0
                if value is None:
                    continue
                counts[1] += 1
                while True:
                    try:
                        producer.produce(
                            topic,
                            value=value.encode("utf-8"),
                            key=None if key is None else key.encode("utf-8"),
                            on_delivery=on_delivery,
                        )
                        break
                    except BufferError:
                        producer.poll(0.1)
                producer.poll(0)
        remaining = producer.flush(60)
        if remaining or errors:
            raise RuntimeError(
                f"producing to {topic!r} failed ({remaining} undelivered): {errors[:3]} - "
                "check the output topic exists and the brokers are reachable"
            )
        tasks = sorted(per_task)
        yield pa.RecordBatch.from_pydict(
            {
                "task": tasks,
                "records": [per_task[t][0] for t in tasks],
                "outputs": [per_task[t][1] for t in tasks],
            },
            schema=pa.schema(
                [("task", pa.string()), ("records", pa.int64()), ("outputs", pa.int64())]
            ),
        )

    return produce


def _progress_summary(report: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a StreamingQueryProgress worth keeping per batch."""
    return {
        "batchId": report["batchId"],
        "timestamp": report["timestamp"],
        "numInputRows": report["numInputRows"],
        "durationMs": dict(report["durationMs"]),
        "stateRows": [op["numRowsTotal"] for op in report["stateOperators"]],
    }


# -- the job -----------------------------------------------------------------------------------


class StreamJob:
    """One run of the job: a streaming query plus its coordinator lifecycle."""

    def __init__(self, args: argparse.Namespace, spark: Any = None) -> None:
        self.args = args
        self.spark = spark
        self.processor_id = args.processor_id or f"{socket.gethostname()}-{os.getpid()}"
        self.kafka_options = {
            "bootstrap_servers": args.bootstrap_servers or "",
            "kafka_config_file": os.path.abspath(args.kafka_config) if args.kafka_config else "",
        }
        self.store: Any = None
        self.model: JobModel | None = None
        self.store_lock = threading.Lock()
        self.stop_event = threading.Event()
        self.stop_seen_at: float | None = None
        self.gate_dir = tempfile.mkdtemp(prefix="samza-expand-gate-")
        self.gate_path = os.path.join(self.gate_dir, "stop")
        self.batches = 0
        self.committed: str | None = None
        self.last_batch_reported = -1
        self._commit_consumer: Any = None
        self.order_check: Any = None  # spark.stale.OrderCheck with --barrier-offsets

    # coordinator ------------------------------------------------------------------------------

    def _kafka_config(self) -> dict[str, str]:
        from airflow_samza_expand.spark.source import kafka_client_config

        return kafka_client_config(self.kafka_options)

    def heartbeat(self, state: str) -> None:
        assert self.model is not None
        with self.store_lock:
            self.store.heartbeat(self.processor_id, self.model.version, state)

    def check_stop(self) -> bool:
        """True once a stop for this job model version (or a newer one) is requested."""
        assert self.model is not None
        if self.stop_event.is_set():
            return True
        with self.store_lock:
            request = self.store.stop_request()
        if not request:
            return False
        version = int(request.get("version", 0))
        if version < self.model.version:
            return False  # a stale request for an older job model
        log.info(
            "stop requested for job model v%s (running v%s, reason %r): finishing the current "
            "batch",
            version,
            self.model.version,
            request.get("reason"),
        )
        with open(self.gate_path, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(request))
        self.stop_seen_at = time.monotonic()
        self.stop_event.set()
        return True

    # offsets ----------------------------------------------------------------------------------

    def commit_offsets(self, end_offset_json: str) -> None:
        """Commit a finished batch's end offsets for the consumer group ``<job>``."""
        from confluent_kafka import Consumer

        from airflow_samza_expand.spark.source import commit_group_offsets

        if end_offset_json == self.committed:
            return
        if self._commit_consumer is None:
            config = self._kafka_config()
            config.update({"group.id": self.args.job_name, "enable.auto.commit": "false"})
            self._commit_consumer = Consumer(config)
        commit_group_offsets(self._commit_consumer, json.loads(end_offset_json))
        self.committed = end_offset_json
        log.info("committed group %r offsets %s", self.args.job_name, end_offset_json)
        if self.order_check is not None:  # stale placements beyond the barrier (rule 1.5)
            self.order_check.after_commit(json.loads(end_offset_json))

    def commit_progress(self, query: Any) -> None:
        """Commit the newest finished batch's end offsets; record new progress reports."""
        reports = [r for r in query.recentProgress if r["batchId"] > self.last_batch_reported]
        if self.args.progress_file and reports:
            with open(self.args.progress_file, "a", encoding="utf-8") as handle:
                for report in reports:
                    if report["numInputRows"] or report["durationMs"].get("addBatch"):
                        handle.write(json.dumps(_progress_summary(report)) + "\n")
        if reports:
            self.last_batch_reported = max(r["batchId"] for r in reports)
        progress = query.lastProgress
        if progress is None or not progress["sources"]:
            return
        end = progress["sources"][0]["endOffset"]
        if end:
            self.commit_offsets(end if isinstance(end, str) else json.dumps(end))

    # batches ----------------------------------------------------------------------------------

    def on_batch(self, batch_df: Any, batch_id: int) -> None:
        """foreachBatch: write outputs, log per-task counts, heartbeat, look for a stop."""
        started = time.monotonic()
        produce = _produce_outputs(self.kafka_options, self.args.output_topic)
        summary = batch_df.mapInArrow(produce, SUMMARY_SCHEMA).collect()
        per_task: dict[str, int] = {}
        outputs = 0
        for row in summary:
            per_task[row["task"]] = per_task.get(row["task"], 0) + row["records"]
            outputs += row["outputs"]
        self.batches += 1
        log.info(
            "batch %d: %d records, %d outputs, per task %s (%.2fs)",
            batch_id,
            sum(per_task.values()),
            outputs,
            json.dumps(dict(sorted(per_task.items()))),
            time.monotonic() - started,
        )
        self.heartbeat("running")
        self.check_stop()

    # run --------------------------------------------------------------------------------------

    def _spark(self) -> Any:
        if self.spark is not None:
            return self.spark
        from pyspark.sql import SparkSession

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = SparkSession.builder.appName(f"samza-expand-{self.args.job_name}")
        if self.args.master:
            builder = builder.master(self.args.master)
        elif "PYSPARK_GATEWAY_PORT" not in os.environ:  # not launched by spark-submit
            builder = builder.master("local[2]")
        builder = builder.config(
            "spark.sql.shuffle.partitions", str(self.args.shuffle_partitions)
        ).config("spark.ui.showConsoleProgress", "false")
        for item in self.args.spark_conf:
            key, _, value = item.partition("=")
            builder = builder.config(key.strip(), value.strip())
        self.spark = builder.getOrCreate()
        self.spark.sparkContext.setLogLevel("WARN")
        return self.spark

    def _check_topics(self, model: JobModel) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(self._kafka_config())
        metadata = admin.list_topics(timeout=30)
        for stream, count in sorted(model.partition_counts().items()):
            topic = metadata.topics.get(stream)
            if topic is None or topic.error is not None:
                raise UsageError(
                    f"input topic {stream!r} of job model v{model.version} does not exist - "
                    "create it or fix the job model"
                )
            if len(topic.partitions) < count:
                raise UsageError(
                    f"topic {stream!r} has {len(topic.partitions)} partitions but job model "
                    f"v{model.version} reads {count} - expand the topic first"
                )
        out = metadata.topics.get(self.args.output_topic)
        if out is None or out.error is not None:
            raise UsageError(
                f"output topic {self.args.output_topic!r} does not exist - create it first"
            )

    def start_query(self) -> Any:
        from pyspark.sql.streaming.state import GroupStateTimeout

        from airflow_samza_expand.spark.source import SamzaKafkaDataSource
        from airflow_samza_expand.spark.state import OUTPUT_SCHEMA, STATE_SCHEMA, StatefulFunction

        assert self.model is not None
        spark = self._spark()
        spark.dataSource.register(SamzaKafkaDataSource)
        options = {
            "job_model": self.model.to_json(),
            "group_id": self.args.job_name,
            "max_records_per_batch": str(self.args.max_records_per_batch),
            "stop_gate": self.gate_path,
            **self.kafka_options,
        }
        records = spark.readStream.format(SamzaKafkaDataSource.name()).options(**options).load()
        buckets = self.args.state_buckets
        if buckets:
            from pyspark.sql import functions as F

            records = records.withColumn("bucket", F.pmod(F.xxhash64("key"), F.lit(buckets)))
        outputs = records.groupBy("task", "bucket" if buckets else "key").applyInPandasWithState(
            StatefulFunction(self.args.processor, buckets),
            OUTPUT_SCHEMA,
            STATE_SCHEMA,
            "Update",
            GroupStateTimeout.NoTimeout,
        )
        return (
            outputs.writeStream.foreachBatch(self.on_batch)
            .outputMode("update")
            .option("checkpointLocation", self.args.checkpoint_dir)
            .trigger(**parse_trigger(self.args.trigger))
            .queryName(f"samza_expand_{re.sub(r'[^0-9A-Za-z_]', '_', self.args.job_name)}")
            .start()
        )

    def run(self) -> int:
        from airflow_samza_expand.kafka.coordinator import open_store
        from airflow_samza_expand.spark.state import check_task_set, state_layout, write_task_set

        args = self.args
        try:
            self.store = open_store(args.coordinator, args.job_name, self._kafka_config())
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        model = self.store.latest_job_model()
        if model is None:
            raise UsageError(
                f"coordinator store {args.coordinator!r} has no job model for job "
                f"{args.job_name!r} - write version 1 first (e.g. JobModel.initial(...) and "
                "write_job_model)"
            )
        self.model = model
        log.info(
            "job %r: job model v%d (grouper %s), tasks %s",
            args.job_name,
            model.version,
            model.grouper,
            {t: sorted(str(s) for s in ssps) for t, ssps in model.task_to_ssps().items()},
        )
        self._check_topics(model)
        from airflow_samza_expand.spark.stale import order_check_from_args

        try:
            self.order_check = order_check_from_args(args, model, self._kafka_config())
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        layout = state_layout(args.state_buckets)
        try:
            problems = check_task_set(
                args.checkpoint_dir, model, allow_task_change=args.allow_task_change, layout=layout
            )
        except ValueError as exc:  # e.g. a remote checkpoint URL the guard cannot read
            raise UsageError(str(exc)) from None
        if problems:
            log.warning("--allow-task-change: accepting %s", "; ".join(problems))
        write_task_set(args.checkpoint_dir, model, layout)
        self.heartbeat("starting")
        try:
            query = self.start_query()
            self.heartbeat("running")
            try:
                failed = self._watch(query)
            finally:
                if query.isActive:
                    query.stop()
        except BaseException:
            self.heartbeat("failed")
            raise
        try:
            self.commit_progress(query)
        except ExpansionError:  # --on-stale-placement fail (spark.stale): exit 2, named
            self.heartbeat("failed")
            raise
        except Exception as exc:
            log.error("final offset commit failed: %s", exc)
            failed = True
        self.heartbeat("failed" if failed else "stopped")
        log.info(
            "job %r %s after %d batches (job model v%d)",
            args.job_name,
            "failed" if failed else "stopped",
            self.batches,
            model.version,
        )
        return 1 if failed else 0

    def _watch(self, query: Any) -> bool:
        """Poll the query until it ends or a requested stop is complete; True if it failed."""
        next_stop_poll = time.monotonic() + STOP_POLL_S
        next_heartbeat = time.monotonic() + IDLE_HEARTBEAT_S
        while True:
            ended = query.awaitTermination(POLL_S)
            if ended:
                error = query.exception()
                if error is not None:
                    log.error("streaming query failed: %s", error)
                    return True
                return False
            self.commit_progress(query)
            now = time.monotonic()
            if self.stop_event.is_set():
                status = query.status
                assert self.stop_seen_at is not None
                if not status["isTriggerActive"] and now - self.stop_seen_at > POLL_S:
                    log.info("stop: no batch in flight, stopping the query")
                    query.stop()
                    return False
                continue
            if now >= next_stop_poll:
                self.check_stop()
                next_stop_poll = now + STOP_POLL_S
            if now >= next_heartbeat:
                self.heartbeat("running")
                next_heartbeat = now + IDLE_HEARTBEAT_S

    def close(self) -> None:
        if self.order_check is not None:
            self.order_check.close()
        if self._commit_consumer is not None:
            self._commit_consumer.close()
            self._commit_consumer = None
        if self.store is not None and hasattr(self.store, "close"):
            self.store.close()
        for name in os.listdir(self.gate_dir):
            os.unlink(os.path.join(self.gate_dir, name))
        os.rmdir(self.gate_dir)


def main(argv: list[str] | None = None, *, spark: Any = None) -> int:
    """Run the job; ``spark`` reuses an existing SparkSession (tests)."""
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
    args = build_parser().parse_args(argv)
    try:
        validate_args(args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    job = StreamJob(args, spark=spark)
    try:
        return job.run()
    except (UsageError, ExpansionError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        job.close()


if __name__ == "__main__":
    sys.exit(main())
