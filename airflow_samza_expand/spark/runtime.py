"""The job-side runtime: any PySpark streaming job, expanded by the DAG, in three lines.

    from airflow_samza_expand.spark import runtime
    job = runtime.attach(spark)             # the command line the DAG passes (or keywords)
    def start():                            # reads the job model in force each time
        df = job.read_kafka()               # Spark's Kafka source + a `task` column
        return my_logic(df).writeStream.option("checkpointLocation", job.checkpoint_dir).start()
    sys.exit(job.run(start))

* `attach` reads the newest job model (refuses to start without one), joins the job's active
  lease and waits as a warm standby while another processor is active or with ``--standby``
  (DESIGN rule 1.7); it heartbeats ``starting``/``standby``/``running``/``stopped`` with the job
  model version and the ``standby`` capability (rule 1.8). A stop for its version while it
  waits ends the process (exit 0).
* `Job.read_kafka` reads exactly the job model's SSPs (``assign``, never ``subscribe``):
  Spark's own Kafka source (``spark-sql-kafka-0-10``: ``--packages
  org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version>``), whose partitions new to the
  checkpoint (added by an expansion) start at their log start; or ``source="python"``, the
  provider's reader (`spark._source`). Kafka security settings go as ``kafka.`` options read from
  ``--kafka-config FILE``, never on a command line. Before its first query it checks a kept
  checkpoint (a job moved onto the runtime with its state, `spark._adoption`): one Kafka
  source, no topic or partition the job model lacks, no source evolution - else it prints the
  problem and exits 2, nothing processed.
* `Job.run(start)`, handed the function that starts the query (it calls `Job.read_kafka` and
  returns the started query), may restart it: with Spark's own Kafka source the processor
  advertises ``in-app`` (rule 1.10), and once a newer job model is written and its expansion's
  barrier has passed it lets the running batch finish, stops the query and calls ``start()``
  again - the DataFrame now reads the new job model's SSPs on the same checkpoint (old
  partitions go on from their offsets; Spark's source starts a partition new to the checkpoint
  at its log start), same lease, same processor id, same Spark application - and heartbeats
  ``running`` on it (the DAG's acknowledgement). Handed a started query (`Job.run(query)`) the
  job can only be restarted (warm or cold, by the DAG).
* `Job.run` drives the query: after each committed micro-batch it commits the batch's end
  offsets to the consumer group ``<job>`` (the barrier reads it) only while it holds the lease;
  on a stop record it lets the batch finish, commits, heartbeats ``stopped``, releases the lease
  and returns 0; with ``--barrier-offsets`` and after a switch in place it counts stale
  placements (rule 1.5), in the reader's batches with ``source="python"``. Exit codes:
  0 done or stopped, 1 the query failed, 2 bad input, 3 the lease was lost.

The lease fences the group commit exactly; a user's own sink is fenced at the watch interval
(`POLL_S`) - call `Job.guard` in a ``foreachBatch`` to fence it per batch.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from airflow_samza_expand.core._liveness import ROLE_STANDBY
from airflow_samza_expand.core.errors import ExpansionError
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.spark._args import (
    UsageError,
    assignment,
    parse_args,
    parse_trigger,
    task_of,
    validate_runtime_args,
)
from airflow_samza_expand.spark._driving import EXIT_USAGE, QueryDriver
from airflow_samza_expand.spark._lifecycle import (
    LeaseLostError,
    Lifecycle,
)

log = logging.getLogger("airflow_samza_expand.spark.runtime")


class Job(QueryDriver):
    """One processor of a job: its job model, lifecycle (`Lifecycle`) and offset commits
    (`QueryDriver`)."""

    def __init__(self, args: argparse.Namespace, spark: Any = None) -> None:
        self.args = args
        self.spark = spark
        self.extra_args: list[str] = []  # the job's own options (`attach`)
        self.processor_id = args.processor_id or f"{socket.gethostname()}-{os.getpid()}"
        # the group its processed offsets go to (--consumer-group; default the job name)
        self.consumer_group = getattr(args, "consumer_group", None) or getattr(args, "job_name", "")
        self.kafka_options = {
            "bootstrap_servers": args.bootstrap_servers or "",
            "kafka_config_file": os.path.abspath(args.kafka_config) if args.kafka_config else "",
        }
        self.life: Lifecycle | None = None
        self.model: JobModel | None = None
        self.batches = 0
        self.committed: dict[str, dict[str, int]] | None = None
        self.last_batch_reported = -1
        self.lease_lost: LeaseLostError | None = None
        self.order_check: Any = None  # spark._stale.OrderCheck with --barrier-offsets
        self._commit_consumer: Any = None
        self._starting = contextlib.ExitStack()
        self._closed = False
        self.source_registered = False
        self.checkpoint_checked = False  # `check_checkpoint`, before the first query
        self.switch: Any = None  # spark._switch.SwitchPublisher with the python source
        self.start_query: Callable[[], Any] | None = None  # job.run(start): in-app (rule 1.10)
        self.restart_due: float | None = None
        self.next_model: JobModel | None = None  # the job model the query restarts on
        self._waiting_for: tuple[int, str] | None = None  # the last "why not yet" logged
        self.before_count: Any = None  # spark._stale_before.BeforeSnapshotCount (idem)

    # settings --------------------------------------------------------------------------------

    @property
    def lifecycle(self) -> Lifecycle:
        assert self.life is not None
        return self.life

    @property
    def checkpoint_dir(self) -> str:
        return str(self.args.checkpoint_dir)

    @property
    def output_topic(self) -> str | None:
        return self.args.output_topic

    @property
    def trigger(self) -> dict[str, Any]:
        """``writeStream.trigger(**job.trigger)`` as ``--trigger`` says."""
        return parse_trigger(self.args.trigger)

    def kafka_config(self) -> dict[str, str]:
        """The librdkafka settings (``--bootstrap-servers`` / ``--kafka-config``)."""
        from airflow_samza_expand.spark._source import kafka_client_config

        return kafka_client_config(self.kafka_options)

    def spark_kafka_options(self) -> dict[str, str]:
        """``kafka.*`` options for Spark's Kafka source or sink (``.options(**...)``)."""
        from airflow_samza_expand.spark._kafka_options import spark_kafka_options

        return spark_kafka_options(self.kafka_config())

    # attach ----------------------------------------------------------------------------------

    def prepare(self, warm: Callable[[], None] | None = None) -> JobModel | None:
        """Open the store, heartbeat, join the lease and wait as a standby (warming up with
        ``warm``); the job model to run, or None when a stop for it came first."""
        from airflow_samza_expand.store import open_store

        args = self.args
        try:
            store = open_store(args.coordinator, args.job_name, self.kafka_config())
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        self.life = Lifecycle(
            store,
            args.job_name,
            self.processor_id,
            self.kafka_config(),
            ttl_s=args.ttl,
            use_lease=not args.no_lease,
        )
        self.life.consumer_group = self.consumer_group
        newest = store.latest_job_model()
        if newest is None and not args.job_model_version:
            raise UsageError(
                f"coordinator store {args.coordinator!r} has no job model for job "
                f"{args.job_name!r} - write job model v1 first (samza-expand init-job where "
                "available, or JobModel.initial(...) and the store's write_job_model)"
            )
        self.life.version = args.job_model_version or newest.version  # type: ignore[union-attr]
        self.life.reap_dead()
        # a launched standby heartbeats ``starting`` until it is warm, then ``standby``: the
        # handover's stop step waits for that before it stops the running version
        warming = bool(args.standby and self.life.use_lease)
        state = "starting" if warming or not self.life.use_lease else "standby"
        with self.life.beating(state, ROLE_STANDBY if warming else None):
            if newest is not None:
                self.check_topics(newest)  # Kafka metadata warm (bad input refused early)
            if self.life.use_lease:
                self.life.join()
                if args.standby and warm is not None:
                    warm()
        return self.life.wait_to_process(args.job_model_version or 1)

    def start(self, model: JobModel) -> None:
        """Take ``model`` on: check its topics, watch coverage, set up the order check."""
        from airflow_samza_expand.spark import _coverage
        from airflow_samza_expand.spark._stale import order_check_from_args

        self.model = model
        log.info(
            "job %r: processor %s runs job model v%d (grouper %s), tasks %s",
            self.args.job_name,
            self.processor_id,
            model.version,
            model.grouper,
            {t: sorted(str(s) for s in ssps) for t, ssps in model.task_to_ssps().items()},
        )
        self.check_topics(model)
        life = self.lifecycle
        life.coverage = _coverage.CoverageWatch(
            model.partition_counts(),
            model.version,
            _coverage.admin_live_counts(self.kafka_config()),
        )
        try:
            self.order_check = order_check_from_args(
                self.args, model, self.kafka_config(), report_dir=self.lifecycle.report_dir
            )
            life.order_check = self.order_check  # its counts go into the heartbeat
        except ValueError as exc:
            raise UsageError(str(exc)) from None

    def begin(self) -> None:
        """Heartbeat ``starting`` from a thread until `run` (the query start takes a while)."""
        self._starting.enter_context(self.lifecycle.beating("starting"))

    def check_topics(self, model: JobModel) -> None:
        from airflow_samza_expand._kafka.clients import AdminClient

        metadata = AdminClient(self.kafka_config()).list_topics(timeout=30)
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
        out = self.output_topic
        if out and (metadata.topics.get(out) is None or metadata.topics[out].error is not None):
            raise UsageError(f"output topic {out!r} does not exist - create it first")

    # reading ---------------------------------------------------------------------------------

    def read_kafka(self, source: str = "kafka", **options: str) -> Any:
        """A streaming DataFrame of exactly the job model's SSPs plus ``task``; ``options``
        are added to (or override) the source's. ``source="python"``: the provider's reader."""
        from pyspark.sql import functions as F

        model = self.model
        assert model is not None and self.spark is not None, "attach() first"
        cap = self.args.max_records_per_batch
        if source == "python":
            from airflow_samza_expand.spark._python_workers import warn_without_unix_sockets

            self.register_source()
            warn_without_unix_sockets(self.spark)
            settings = self.python_source_options(model)
            self.lifecycle.in_place = True  # rule 1.8: this query can switch in place
            self.lifecycle.counts_stale = True  # ... and count stale placements for the barrier
            return self.spark.readStream.format("samza_kafka").options(**settings, **options).load()
        if source != "kafka":
            raise ValueError(f"source {source!r} - give 'kafka' (Spark's) or 'python'")
        if not self.checkpoint_checked:  # before the first query (an in-app restart: ours)
            self.check_checkpoint(model)
        # rule 1.10: handed the function starting the query, the runtime restarts it in-app
        self.lifecycle.in_app = self.start_query is not None
        settings = {
            **self.spark_kafka_options(),
            "assign": json.dumps(assignment(model), sort_keys=True),
            # a fresh checkpoint reads the job model's partitions from the group's committed
            # offsets, from their log start where it has none; a restarted query reads a
            # partition new to its checkpoint from its log start (Spark ignores startingOffsets
            # once the checkpoint has offsets)
            "startingOffsets": self.starting_offsets(model),
            "failOnDataLoss": "true",
            **({"maxOffsetsPerTrigger": str(cap)} if cap else {}),
            **options,
        }
        if any("jaas" in k or "password" in k for k in settings):
            from airflow_samza_expand.spark._kafka_options import REDACTION_REGEX

            self.spark.conf.set("spark.sql.redaction.options.regex", REDACTION_REGEX)
        frame = self.spark.readStream.format("kafka").options(**settings).load()
        pairs = [F.lit(x) for key, task in sorted(task_of(model).items()) for x in (key, task)]
        where = F.concat_ws(":", F.col("topic"), F.col("partition").cast("string"))
        return frame.withColumn("task", F.element_at(F.create_map(*pairs), where))

    def check_checkpoint(self, model: JobModel) -> None:
        """Before anything is processed: refuse a kept checkpoint the job model cannot go on
        from (`spark._adoption`) - it prints the problem and exits 2."""
        from airflow_samza_expand.spark import _adoption

        try:
            start = _adoption.check_checkpoint(self.checkpoint_dir, model)
            self.checkpoint_checked = True
        except _adoption.CheckpointRefused as exc:
            log.error("job %r: %s", self.args.job_name, exc)
            print(f"error: {exc}", file=sys.stderr)
            self._starting.close()
            self.lifecycle.heartbeat("failed")
            if self.start_query is None:  # job.run(query) form: run() will not close it
                self.close()
            raise SystemExit(EXIT_USAGE) from None
        if start is not None:
            _adoption.log_start(start, model)

    def starting_offsets(self, model: JobModel) -> str:
        """Spark's ``startingOffsets`` for a fresh checkpoint: ``earliest``, or where the job's
        consumer group has committed offsets, the JSON of every SSP's start (-2: log start).
        A checkpoint with a committed batch decides itself (``earliest``, unused by Spark)."""
        from airflow_samza_expand.spark._adoption import has_committed_batch
        from airflow_samza_expand.spark._start_position import group_start_offsets

        if has_committed_batch(self.checkpoint_dir):  # Spark goes on from it: no lookup
            return "earliest"
        starts = group_start_offsets(
            self.kafka_config(), self.consumer_group, model.partition_counts()
        )
        if not any(o is not None for parts in starts.values() for o in parts.values()):
            return "earliest"
        log.info("job %r: a fresh checkpoint starts from group %r's committed offsets %s",
                 self.args.job_name, self.consumer_group, starts)  # fmt: skip
        return json.dumps(
            {
                t: {str(p): (-2 if o is None else o) for p, o in sorted(ps.items())}
                for t, ps in sorted(starts.items())
            }  # fmt: skip
        )

    def python_source_options(self, model: JobModel) -> dict[str, str]:
        from airflow_samza_expand.spark._stale import switch_rule
        from airflow_samza_expand.spark._stale_before import BeforeSnapshotCount
        from airflow_samza_expand.spark._switch import SwitchPublisher, snapshots_up_to

        life = self.lifecycle
        switch_path = os.path.join(life.gate_dir, "switch")
        self.switch = SwitchPublisher(
            life.store, model, switch_path, life.store_lock,
            rule_for=lambda m: switch_rule(life.store, m, self.args.partitioner, life.report_dir),
        )  # fmt: skip
        before_path = os.path.join(life.gate_dir, "stale-before")
        self.before_count = BeforeSnapshotCount(
            life.store, life.store_lock, self.processor_id, self.kafka_config(), life.report_dir,
            before_path,
        )  # fmt: skip
        check = self.order_check
        with life.store_lock:
            snapshots = snapshots_up_to(life.store, model.version) or []
        return {
            "snapshots": json.dumps(snapshots, sort_keys=True),
            "switch_path": switch_path,
            "job_model": model.to_json(),
            "group_id": self.consumer_group,
            "max_records_per_batch": str(self.args.max_records_per_batch),
            "stop_gate": self.lifecycle.gate_path,
            "order_check": check.rule.to_json() if check and check.rule else "",
            "stale_before_path": before_path,
            # under the lease the driver commits, after confirming it (fencing a zombie)
            "commit_offsets": "false" if self.lifecycle.use_lease else "true",
            **self.kafka_options,
        }

    def register_source(self) -> None:
        """Register the provider's data source with the session (once)."""
        if not self.source_registered:
            from airflow_samza_expand.spark._source import SamzaKafkaDataSource

            self.spark.dataSource.register(SamzaKafkaDataSource)
            self.source_registered = True

    # running -----------------------------------------------------------------------------------

    def run(self, query: Any) -> int:
        """Drive the query (module docstring): ``query`` is the started query, or the function
        that starts it (the runtime then restarts it on a newer job model in-app)."""
        if callable(query) and not hasattr(query, "awaitTermination"):
            self.start_query = query
            try:
                query = self._started()
            except BaseException:
                self._starting.close()
                self.lifecycle.heartbeat("failed")
                raise
        log.info(
            "job %r: processor %s runs job model v%d in Spark application %s (%s)",
            self.args.job_name,
            self.processor_id,
            self.lifecycle.version,
            self._application_id(),
            "in-app restart: it restarts its query on a newer job model"
            if self.lifecycle.in_app
            else "it can only be restarted"
            if not self.lifecycle.in_place
            else "in place",
        )
        return super().run(query)

    def _application_id(self) -> str:
        try:
            return str(self.spark.sparkContext.applicationId)
        except Exception:  # noqa: BLE001 - a Spark Connect session has no SparkContext
            return "?"

    def _started(self) -> Any:
        assert self.start_query is not None
        query = self.start_query()
        if not hasattr(query, "awaitTermination"):
            raise TypeError(
                f"job.run(start): start() returned {query!r} - it must read with job.read_kafka() "
                "and return the started query (...writeStream...start())"
            )
        return query

    def poll_in_app(self) -> None:
        """Rule 1.10: once a newer job model is written and its expansion's barrier has passed,
        decide the restart of the query on it (`restart_due`: the watch lets the running batch
        finish and stops the query; `restart_query` starts it again)."""
        from airflow_samza_expand.spark._switch import barrier_passed

        if self.restart_due is not None:
            return
        life = self.lifecycle
        with life.store_lock:
            newest = life.store.latest_job_model()
            if newest is None or newest.version <= life.version:
                return
            ready, why = barrier_passed(life.store, newest.version, self.committed)
        if not ready:
            if self._waiting_for != (newest.version, why):
                self._waiting_for = (newest.version, why)
                log.info("job model v%d is written; not restarting on it yet: %s",
                         newest.version, why)  # fmt: skip
            return
        log.info(
            "switch in app: job model v%d is written and its barrier has passed (%s): finishing "
            "the running batch, then restarting the query on it",
            newest.version,
            why,
        )
        self.next_model = newest
        self.restart_due = time.monotonic()

    def restart_query(self, query: Any) -> Any:
        """Rule 1.10: the query ended at a batch boundary (`QueryDriver.watch`); commit its last
        batch, take the newer job model on (offset commits, coverage, the order check of the
        expansion that made it) and call ``start()`` again: same checkpoint, lease, processor
        and application. Heartbeats ``running`` on it (the DAG's acknowledgement)."""
        from airflow_samza_expand.spark import _coverage
        from airflow_samza_expand.spark._stale import order_check_from_args

        model = self.next_model
        assert model is not None and self.start_query is not None
        self.commit_progress(query)  # the old query's last batch (fenced by the lease)
        life = self.lifecycle
        self.model = model
        life.version = model.version
        life.coverage = _coverage.CoverageWatch(
            model.partition_counts(),
            model.version,
            _coverage.admin_live_counts(self.kafka_config()),
        )
        if self.order_check is not None:
            self.order_check.close()
        auto = argparse.Namespace(**{**vars(self.args), "barrier_offsets": "auto"})
        # rule 1.5 beyond vN+1's snapshot: Spark's source reads whole ranges, so scan them
        self.order_check = life.order_check = order_check_from_args(
            auto, model, self.kafka_config()
        )
        self.restart_due, self.next_model = None, None
        started = self._started()
        log.info(
            "job %r: processor %s restarted its query on job model v%d in the same Spark "
            "application %s (in-app), tasks %s",
            self.args.job_name,
            self.processor_id,
            model.version,
            self._application_id(),
            {t: sorted(str(s) for s in ssps) for t, ssps in model.task_to_ssps().items()},
        )
        life.heartbeat("running")
        return started

    def poll_switch(self) -> None:
        """Rule 1.9: publish a newer job model to the reader; once the reader plans batches on
        it, take it on here (offset commits, coverage) and heartbeat ``running`` on it. Also
        rule 1.5 before a snapshot: count an expansion in progress (`spark._stale_before`).
        In-app (rule 1.10, Spark's own source): `poll_in_app`."""
        if self.switch is None:
            if self.lifecycle.in_app:
                self.poll_in_app()
            return
        if self.before_count is not None and self.model is not None:
            self.before_count.poll(self.model, self.committed)
        self.switch.poll()
        version = self.switch.reading()
        life = self.lifecycle
        if version is None or version <= life.version:
            return
        with life.store_lock:
            model = life.store.job_model(version)
        if model is None:
            return
        from airflow_samza_expand.spark import _coverage

        log.info("job %r: processor %s reads job model v%d now (in place)",
                 self.args.job_name, self.processor_id, version)  # fmt: skip
        self.model = model
        life.version = version
        life.coverage = _coverage.CoverageWatch(
            model.partition_counts(), version, _coverage.admin_live_counts(self.kafka_config())
        )
        from airflow_samza_expand.spark._stale import order_check_after_switch as after_switch

        self.order_check = life.order_check = after_switch(  # rule 1.5 beyond vN+1's snapshot
            self.args, model, self.kafka_config(), self.lifecycle.report_dir, self.order_check
        )
        life.heartbeat("running")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._starting.close()
        if self.order_check is not None:
            self.order_check.close()
        if self.before_count is not None:
            self.before_count.close()
        if self._commit_consumer is not None:
            self._commit_consumer.close()
        if self.life is not None:
            self.life.close()
            if hasattr(self.life.store, "close"):
                self.life.store.close()


class _AttachedJob(Job):
    """A `Job` from `attach`: `run` also closes it (the job's last call)."""

    def run(self, query: Any) -> int:
        try:
            return super().run(query)
        finally:
            self.close()


def attach(spark: Any, argv: Sequence[str] | None = None, **overrides: Any) -> Job:
    """Attach the running PySpark application to its job (see the module docstring).

    Bad input prints the problem and exits 2; a stop while it waits as a standby exits 0."""
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
    args, extra = parse_args(argv, overrides)
    job = _AttachedJob(args, spark)
    job.extra_args = extra
    try:
        validate_runtime_args(args)
        model = job.prepare(warm=lambda: spark.range(0, 8, numPartitions=2).count())
        if model is None:
            job.lifecycle.heartbeat("stopped")
            log.info("job %r: stop requested while a standby: exiting", args.job_name)
            job.close()
            raise SystemExit(0)
        job.start(model)
        job.begin()
    except (UsageError, ExpansionError) as exc:
        job.close()
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None
    return job


__all__ = ["Job", "assignment", "attach", "task_of"]
