"""The job-side runtime: any PySpark streaming job, expanded by the DAG, in three lines.

    from airflow_samza_expand.spark import runtime
    job = runtime.attach(spark)             # the command line the DAG passes (or keywords)
    def start():                            # reads the job model in force each time
        df = job.read_kafka()               # Spark's Kafka source + a `task` column
        return my_logic(df).writeStream.option("checkpointLocation", job.checkpoint_dir).start()
    sys.exit(job.run(start))

* `attach` reads the newest job model (refuses to start without one), joins the job's active
  lease and waits as a warm standby while another processor is active or with ``--standby``
  (docs/design.md 'Processors and the active lease'); it heartbeats
  ``starting``/``standby``/``running``/``stopped`` with the job model version and the
  ``standby`` capability. A stop for its version while it waits ends the process (exit 0).
* `Job.read_kafka` reads exactly the job model's SSPs (``assign``, never ``subscribe``):
  Spark's own Kafka source (``spark-sql-kafka-0-10``: ``--packages
  org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version>``), whose partitions new to the
  checkpoint (added by an expansion) start at their log start; or ``source="python"``, the
  provider's reader (`spark._source`). Kafka security settings go as ``kafka.`` options read from
  ``--kafka-config FILE``, never on a command line. Before its first query it checks a kept
  checkpoint (a job moved onto the runtime with its state, `spark._adoption`): one Kafka
  source, no topic or partition the job model lacks, no source evolution - else it prints the
  problem and exits 2, nothing processed.
* `Job.run(start)`, handed the function that starts the query (it calls `Job.read_kafka` and returns
  the started query), may restart it: with Spark's own Kafka source the processor advertises
  ``in-app`` (docs/design.md 'The in-app restart'), and once a newer job model is written and its
  expansion's barrier has passed it lets the running batch finish, stops the query and calls
  ``start()`` again - the DataFrame now reads the new job model's SSPs on the same checkpoint (old
  partitions go on from their offsets; Spark's source starts a partition new to the checkpoint at
  its log start), same lease, same processor id, same Spark application - and heartbeats ``running``
  on it (the DAG's acknowledgement). Handed a started query (`Job.run(query)`) the job can only be
  restarted (warm or cold, by the DAG).
* `Job.run` drives the query: after each committed micro-batch it commits the batch's end
  offsets to the consumer group ``<job>`` (the barrier reads it) only while it holds the lease;
  on a stop record it lets the batch finish, commits, heartbeats ``stopped``, releases the lease
  and returns 0; with ``--barrier-offsets`` and after a switch in place it counts stale
  placements, in the reader's batches with ``source="python"``. Exit codes:
  0 done or stopped, 1 the query failed, 2 bad input, 3 the lease was lost.

The lease fences the group commit exactly; a user's own sink is fenced at the watch interval
(`POLL_S`) - call `Job.guard` in a ``foreachBatch`` to fence it per batch.

`Job` wires its parts: the start (`spark._startup`), the query's driving (`spark._driving`), and
the job side of the two restarts that keep the application - the in-app restart
(`spark._in_app`, Spark's own source) and the switch in place (`spark._in_place`, the provider's
reader, whose options are `python_source_options`) - whose Airflow sides are
`_protocol.restart.in_app` and `_protocol.restart.in_place`.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import socket
import sys
from collections.abc import Sequence
from typing import Any

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
from airflow_samza_expand.spark._driving import EXIT_USAGE
from airflow_samza_expand.spark._in_app import InAppRestart
from airflow_samza_expand.spark._in_place import InPlaceSwitch
from airflow_samza_expand.spark._lifecycle import LeaseLostError, Lifecycle
from airflow_samza_expand.spark._startup import StartUp

log = logging.getLogger("airflow_samza_expand.spark.runtime")


class Job(InPlaceSwitch, InAppRestart, StartUp):
    """One processor of a job: its job model, lifecycle (`Lifecycle`), offset commits
    (`spark._driving.QueryDriver`) and the two restarts that keep the application: the switch in
    place with the provider's reader (`spark._in_place`), the in-app restart with Spark's own
    source (`spark._in_app`)."""

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
        self.before_count: Any = None  # spark._stale_before.BeforeSnapshotCount (in place)

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

    # reading ---------------------------------------------------------------------------------

    def read_kafka(self, source: str = "kafka", **options: str) -> Any:
        """A streaming DataFrame of exactly the job model's SSPs plus ``task``; ``options``
        are added to (or override) the source's. ``source="kafka"``: Spark's own source
        (`spark._in_app`); ``source="python"``: the provider's reader (`spark._in_place`)."""
        model = self.model
        assert model is not None and self.spark is not None, "attach() first"
        if source == "python":
            return self.read_python_source(model, options)
        if source != "kafka":
            raise ValueError(f"source {source!r} - give 'kafka' (Spark's) or 'python'")
        return self.read_spark_source(model, options)

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

    def poll_switch(self) -> None:
        """At each poll of the store: the switch in place with the provider's reader, the in-app
        restart's decision with Spark's own source (nothing for a query that can only be
        restarted)."""
        if self.switch is not None:
            self.poll_in_place()
        elif self.lifecycle.in_app:
            self.poll_in_app()

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
