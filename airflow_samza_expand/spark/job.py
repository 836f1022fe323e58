"""Entry point of the stateful PySpark job that honours the job model.

Run it as ``python -m airflow_samza_expand.spark.job ...`` or give this file to spark-submit /
``SparkSubmitOperator(application=...)``. Lifecycle:

1. read the newest job model from the coordinator store (refuse to start without one);
2. refuse a checkpoint written under an incompatible task set (`state.check_task_set`);
3. join the job's active lease group and wait as a standby (heartbeat ``standby``, warmed up;
   a ``--standby`` heartbeats ``starting``, role standby, while it warms up) until it holds the
   lease and the newest job model is >= ``--job-model-version`` (`spark.lifecycle`;
   ``--no-lease`` skips the lease);
4. heartbeat ``starting``, then ``running`` with the job model version after every micro-batch;
5. after each micro-batch (the lease confirmed) commit its end offsets for the group ``<job>``;
6. on a ``stop`` control record for its version (or a newer one): admit no more data, let the
   current micro-batch finish, commit, heartbeat ``stopped``, release the lease and exit 0.
   ``--trigger available-now`` also ends with ``stopped`` once the data present at start is done.

Exit codes: 0 done or stopped, 1 the query failed, 2 bad input (message on stderr),
3 the active lease was lost (another processor took over; nothing more was committed).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import socket
import sys
import time
from typing import Any

# Spark runs this file as a script (spark-submit / SparkSubmitOperator(application=...)):
# make the package importable from the checkout it lives in when it is not installed.
if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from airflow_samza_expand.core.errors import ExpansionError  # noqa: E402
from airflow_samza_expand.core.liveness import ROLE_STANDBY  # noqa: E402
from airflow_samza_expand.core.model import JobModel  # noqa: E402
from airflow_samza_expand.spark.args import (  # noqa: E402
    UsageError,
    build_parser,
    parse_trigger,
    validate_args,
)
from airflow_samza_expand.spark.lifecycle import (  # noqa: E402
    EXIT_LEASE_LOST,
    LeaseLostError,
    Lifecycle,
    heartbeat_interval,
    warm_up,
)
from airflow_samza_expand.spark.outputs import (  # noqa: E402
    SUMMARY_SCHEMA,
    produce_outputs,
    progress_summary,
)

log = logging.getLogger("airflow_samza_expand.spark.job")

STOP_POLL_S = 1.0
POLL_S = 0.5
# The downtime of a handover runs from the old processor's last commit to the new one's first:
# poll often while stopping (stop the query once no trigger has been active for STOP_SETTLE_S)
# and until the first commit (batches are committed from this loop), but for at most
# FIRST_COMMIT_FAST_S after the start: an idle input never gives a first commit.
FAST_POLL_S = 0.05
STOP_SETTLE_S = 0.1
FIRST_COMMIT_FAST_S = 60.0


# -- the job -----------------------------------------------------------------------------------


class StreamJob:
    """One run of the job: a streaming query plus its processor lifecycle (`Lifecycle`)."""

    def __init__(self, args: argparse.Namespace, spark: Any = None) -> None:
        self.args = args
        self.spark = spark
        self.processor_id = args.processor_id or f"{socket.gethostname()}-{os.getpid()}"
        self.kafka_options = {
            "bootstrap_servers": args.bootstrap_servers or "",
            "kafka_config_file": os.path.abspath(args.kafka_config) if args.kafka_config else "",
        }
        self.life: Lifecycle | None = None
        self.model: JobModel | None = None
        self.batches = 0
        self.committed: str | None = None
        self.last_batch_reported = -1
        self.lease_lost: LeaseLostError | None = None
        self._commit_consumer: Any = None
        self.order_check: Any = None  # spark.stale.OrderCheck with --barrier-offsets
        self.source_registered = False  # the Kafka data source, registered once per session

    def _kafka_config(self) -> dict[str, str]:
        from airflow_samza_expand.spark.source import kafka_client_config

        return kafka_client_config(self.kafka_options)

    @property
    def lifecycle(self) -> Lifecycle:
        assert self.life is not None
        return self.life

    # offsets ----------------------------------------------------------------------------------

    def commit_offsets(self, end_offset_json: str) -> None:
        """Commit a finished batch's end offsets for the consumer group ``<job>``."""
        from airflow_samza_expand.kafka.clients import Consumer
        from airflow_samza_expand.spark.source import commit_group_offsets

        if end_offset_json == self.committed:
            return
        self.lifecycle.guard(f"committing offsets {end_offset_json}")
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
                        handle.write(json.dumps(progress_summary(report)) + "\n")
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
        """foreachBatch: confirm the lease, write outputs, heartbeat, look for a stop."""
        started = time.monotonic()
        try:
            self.lifecycle.guard(f"writing batch {batch_id}")
        except LeaseLostError as exc:
            self.lease_lost = exc
            raise
        produce = produce_outputs(self.kafka_options, self.args.output_topic)
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
        self.lifecycle.heartbeat("running")
        self.lifecycle.check_stop()

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
        from airflow_samza_expand.kafka.clients import AdminClient

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

    def register_source(self) -> None:
        """Register the Kafka data source with the session (once: a standby does it while it
        warms up, so its query start does not)."""
        if not self.source_registered:
            from airflow_samza_expand.spark.source import SamzaKafkaDataSource

            self._spark().dataSource.register(SamzaKafkaDataSource)
            self.source_registered = True

    def start_query(self) -> Any:
        from airflow_samza_expand.spark.source import SamzaKafkaDataSource
        from airflow_samza_expand.spark.warmup import stateful_outputs

        assert self.model is not None
        spark = self._spark()
        self.register_source()
        options = {
            "job_model": self.model.to_json(),
            "group_id": self.args.job_name,
            "max_records_per_batch": str(self.args.max_records_per_batch),
            "stop_gate": self.lifecycle.gate_path,
            # under the lease the driver commits, after confirming it (fencing a zombie)
            "commit_offsets": "false" if self.lifecycle.use_lease else "true",
            **self.kafka_options,
        }
        records = spark.readStream.format(SamzaKafkaDataSource.name()).options(**options).load()
        outputs = stateful_outputs(records, self.args.processor, self.args.state_buckets)
        return (
            outputs.writeStream.foreachBatch(self.on_batch)
            .outputMode("update")
            .option("checkpointLocation", self.args.checkpoint_dir)
            .trigger(**parse_trigger(self.args.trigger))
            .queryName(f"samza_expand_{re.sub(r'[^0-9A-Za-z_]', '_', self.args.job_name)}")
            .start()
        )

    def _prepare(self) -> JobModel | None:
        """Open the store, warm up as a standby, wait for the lease; the model to run or None."""
        from airflow_samza_expand.store import open_store

        args = self.args
        try:
            store = open_store(args.coordinator, args.job_name, self._kafka_config())
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        self.life = Lifecycle(
            store,
            args.job_name,
            self.processor_id,
            self._kafka_config(),
            ttl_s=args.ttl,
            use_lease=not args.no_lease,
        )
        newest = store.latest_job_model()
        if newest is None and not args.job_model_version:
            raise UsageError(
                f"coordinator store {args.coordinator!r} has no job model for job "
                f"{args.job_name!r} - write version 1 first (e.g. JobModel.initial(...) and "
                "write_job_model)"
            )
        self.life.version = args.job_model_version or newest.version  # type: ignore[union-attr]
        self.life.reap_dead()
        # a launched standby heartbeats ``starting`` until it is warm, then ``standby``: the
        # handover's stop step waits for that before it stops the running version
        warming = bool(args.standby and self.life.use_lease)
        state = "starting" if warming or not self.life.use_lease else "standby"
        with self.life.beating(state, ROLE_STANDBY if warming else None):
            if newest is not None:
                self._check_topics(newest)  # Kafka metadata warm (bad input refused early)
            if self.life.use_lease:
                self.life.join()
                if args.standby:
                    from airflow_samza_expand.spark.warmup import warm_up_pipeline, warm_up_source

                    took = warm_up(self._spark(), args.processor)
                    took += warm_up_pipeline(self._spark(), args.processor, args.state_buckets)
                    model = newest or JobModel.initial(args.job_name, {"warm-up": 1})
                    options = {"job_model": model.to_json(), **self.kafka_options}
                    took += warm_up_source(self._spark(), self.register_source, options)
                    log.info("standby %s warmed up in %.1f s", self.processor_id, took)
        return self.life.wait_to_process(args.job_model_version or 1)

    def run(self) -> int:
        from airflow_samza_expand.spark.state import check_task_set, state_layout, write_task_set

        args = self.args
        model = self._prepare()
        life = self.lifecycle
        if model is None:
            life.heartbeat("stopped")
            log.info("job %r: stop requested while a standby: exiting", args.job_name)
            return 0
        self.model = model
        log.info(
            "job %r: processor %s runs job model v%d (grouper %s), tasks %s",
            args.job_name,
            self.processor_id,
            model.version,
            model.grouper,
            {t: sorted(str(s) for s in ssps) for t, ssps in model.task_to_ssps().items()},
        )
        self._check_topics(model)
        from airflow_samza_expand.spark import coverage

        life.coverage = coverage.CoverageWatch(
            model.partition_counts(),
            model.version,
            coverage.admin_live_counts(self._kafka_config()),
        )
        from airflow_samza_expand.spark.stale import order_check_from_args

        try:
            self.order_check = order_check_from_args(args, model, self._kafka_config())
            life.order_check = self.order_check  # its counts go into the heartbeat
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
        try:
            with life.beating("starting"):  # a cold JVM start takes longer than a short TTL
                query = self.start_query()
            life.heartbeat("running")
            try:
                failed = self._watch(query)
            finally:
                if query.isActive:
                    query.stop()
        except LeaseLostError as exc:
            self.lease_lost = exc
            failed = True
        except BaseException:
            life.heartbeat("failed")
            raise
        if self.lease_lost is not None:
            log.error("%s", self.lease_lost)
            life.heartbeat("stopped")
            return EXIT_LEASE_LOST
        try:
            self.commit_progress(query)
        except LeaseLostError as exc:
            log.error("%s", exc)
            life.heartbeat("stopped")
            return EXIT_LEASE_LOST
        except ExpansionError:  # --on-stale-placement fail (spark.stale): exit 2, named
            life.heartbeat("failed")
            raise
        except Exception as exc:
            log.error("final offset commit failed: %s", exc)
            failed = True
        life.heartbeat("failed" if failed else "stopped")
        life.release()  # the handover: a standby takes the lease now
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
        life = self.lifecycle
        next_stop_poll = time.monotonic() + STOP_POLL_S
        interval = heartbeat_interval(life.ttl_s)
        next_heartbeat = time.monotonic() + interval
        fast_until = time.monotonic() + FIRST_COMMIT_FAST_S
        while True:
            first_commit_due = self.committed is None and time.monotonic() < fast_until
            fast = life.stop_event.is_set() or first_commit_due
            ended = query.awaitTermination(FAST_POLL_S if fast else POLL_S)
            if ended:
                error = query.exception()
                if self.lease_lost is not None:
                    return True
                if error is not None:
                    log.error("streaming query failed: %s", error)
                    return True
                return False
            if life.use_lease and (not life.lease.is_active() or life.lease.epoch != life.epoch):
                self.lease_lost = LeaseLostError(
                    f"processor {self.processor_id} lost the active lease of job "
                    f"{self.args.job_name!r} (epoch {life.epoch}): stopping its query without "
                    "committing more"
                )
                query.stop()
                return True
            self.commit_progress(query)
            now = time.monotonic()
            if life.stop_event.is_set():
                status = query.status
                assert life.stop_seen_at is not None
                if not status["isTriggerActive"] and now - life.stop_seen_at > STOP_SETTLE_S:
                    log.info("stop: no batch in flight, stopping the query")
                    query.stop()
                    return False
                continue
            if now >= next_stop_poll:
                life.check_stop()
                next_stop_poll = now + STOP_POLL_S
            if now >= next_heartbeat:
                life.heartbeat("running")
                next_heartbeat = now + interval

    def close(self) -> None:
        if self.order_check is not None:
            self.order_check.close()
        if self._commit_consumer is not None:
            self._commit_consumer.close()
            self._commit_consumer = None
        if self.life is not None:
            self.life.close()
            if hasattr(self.life.store, "close"):
                self.life.store.close()


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
