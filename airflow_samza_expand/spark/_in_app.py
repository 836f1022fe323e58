"""The in-app restart, job side (its Airflow side: `_protocol.restart.in_app`; docs/design.md,
"The in-app restart"): reading with Spark's own Kafka source, and restarting the query on a
newer job model inside the same application.

* `InAppRestart.read_spark_source` - Spark's ``kafka`` source on exactly the job model's SSPs
  (``assign``) plus a ``task`` column; a fresh checkpoint starts from the job's consumer group,
  a kept one is checked first (`spark._adoption`). A job handed to ``job.run(query)`` (a started
  query) reads this way too and can only be restarted by the DAG (warm or cold).
* `InAppRestart.poll_in_app` - once a newer job model is written and its expansion's barrier has
  passed, decide the restart (`restart_due`): the watch lets the running batch finish and stops
  the query.
* `InAppRestart.restart_query` - commit the old query's last batch, take the newer job model on
  and call the job's ``start()`` again: same checkpoint, lease, processor and application.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.spark._args import assignment, task_of
from airflow_samza_expand.spark._driving import EXIT_USAGE, QueryDriver

log = logging.getLogger("airflow_samza_expand.spark.runtime")

# Spark's Kafka source keeps a consumer per partition in a pool, and a consumer that read its
# range up to the log end leaves a fetch waiting there for fetch.max.wait.ms (500 ms by
# default): the next batch's read of that partition waits it out first. With a read task per
# partition that is about half a second per partition and batch (256 partitions on 2 cores:
# about a minute a batch). A fetch at the log end returns after 10 ms instead, as the
# provider's reader's does (`spark._source_read.READ_FETCH_SETTINGS`); the connection's own
# setting and the job's read_kafka options win.
SPARK_SOURCE_FETCH = {"kafka.fetch.max.wait.ms": "10"}
# Spark's pool keys its consumers by group id and partition, and a query without a group id
# of its own gets a new random one at each start: an in-app restart would open a consumer
# for every partition again (512 at 256 -> 512: seconds of the restarted query's first
# batch). The source reads by ``assign`` - no group membership, no commits -, so one group
# id per job (`source_group_id`) lets the restarted query take the pooled consumers back.
SOURCE_GROUP_SUFFIX = ".spark-source"


def source_group_id(consumer_group: str) -> str:
    """The group id of Spark's Kafka consumers for the job committing to ``consumer_group``
    (never that group itself: nothing is committed under this one)."""
    return consumer_group + SOURCE_GROUP_SUFFIX


def spark_source_settings(
    model: JobModel,
    kafka_options: Mapping[str, str],
    starting_offsets: str,
    max_records_per_batch: int,
    options: Mapping[str, str],
    consumer_group: str,
) -> dict[str, str]:
    """The options of Spark's Kafka source on ``model``'s SSPs: `SPARK_SOURCE_FETCH`, the
    consumers' group id (`source_group_id`), the connection's ``kafka.*`` options, the
    assignment and start, the batch cap; then the job's own ``options`` (they win)."""
    cap = max_records_per_batch
    return {
        **SPARK_SOURCE_FETCH,
        "kafka.group.id": source_group_id(consumer_group),
        **kafka_options,
        "assign": json.dumps(assignment(model), sort_keys=True),
        "startingOffsets": starting_offsets,
        "failOnDataLoss": "true",
        **({"maxOffsetsPerTrigger": str(cap)} if cap else {}),
        **options,
    }


# Spark's Kafka source keeps a consumer per partition an executor reads, in a pool of this
# many per executor; past it each new borrow closes the oldest idle consumers, so the next
# batch opens them again. Spark reads the setting when the executor starts: the runtime can
# only say so (`warn_small_consumer_pool`), at each query start on a job model.
CONSUMER_POOL = "spark.kafka.consumer.cache.capacity"
CONSUMER_POOL_DEFAULT = 64


def consumer_pool_shortfall(spark: Any, model: JobModel) -> tuple[int, int] | None:
    """``(partitions per executor, pool capacity)`` when ``model``'s SSPs spread over the
    application's executors exceed Spark's Kafka consumer pool; None when they fit or the
    application cannot be asked (Spark Connect)."""
    try:
        context = spark.sparkContext
        capacity = int(str(context.getConf().get(CONSUMER_POOL, str(CONSUMER_POOL_DEFAULT))))
    except Exception:  # noqa: BLE001 - Spark Connect: no SparkContext to ask
        return None
    try:  # the driver is one of the infos; local mode has only it, and it reads
        executors = max(len(context._jsc.sc().statusTracker().getExecutorInfos()) - 1, 1)
    except Exception:  # noqa: BLE001 - counted as one executor: the warning errs on the safe side
        executors = 1
    partitions = sum(model.partition_counts().values())
    per_executor = -(-partitions // executors)
    return (per_executor, capacity) if per_executor > capacity else None


def warn_small_consumer_pool(spark: Any, model: JobModel) -> bool:
    """Log how to size Spark's Kafka consumer pool when ``model``'s partitions outgrow it
    (`consumer_pool_shortfall`); whether it warned."""
    shortfall = consumer_pool_shortfall(spark, model)
    if shortfall is None:
        return False
    per_executor, capacity = shortfall
    log.warning(
        "job model v%d has up to %d partitions per executor, more than Spark's Kafka consumer "
        "pool keeps (%s=%d): Spark closes and opens consumers again every batch - start the "
        "application with --conf %s=<partitions per executor after the growths you plan>",
        model.version, per_executor, CONSUMER_POOL, capacity, CONSUMER_POOL,
    )  # fmt: skip
    return True


class InAppRestart(QueryDriver):
    """The in-app side of `spark.runtime.Job` (module docstring)."""

    spark: Any
    checkpoint_dir: str
    checkpoint_checked: bool = False  # `check_checkpoint`, before the first query
    start_query: Callable[[], Any] | None = None  # job.run(start): the query can restart in-app
    next_model: JobModel | None = None  # the job model the query restarts on
    _waiting_for: tuple[int, str] | None = None  # the last "why not yet" logged
    take_on: Callable[[JobModel, Any], None]  # `spark._startup.StartUp.take_on`
    spark_kafka_options: Callable[[], dict[str, str]]  # `spark.runtime.Job`
    close: Callable[[], None]  # `spark.runtime.Job`

    def _application_id(self) -> str:
        try:
            return str(self.spark.sparkContext.applicationId)
        except Exception:  # noqa: BLE001 - a Spark Connect session has no SparkContext
            return "?"

    # reading ---------------------------------------------------------------------------------

    def read_spark_source(self, model: JobModel, options: Mapping[str, str]) -> Any:
        """Spark's own Kafka source on ``model``'s SSPs plus ``task`` (module docstring)."""
        from pyspark.sql import functions as F

        if not self.checkpoint_checked:  # before the first query (an in-app restart: ours)
            self.check_checkpoint(model)
        # handed the function starting the query, the runtime restarts it in-app
        self.lifecycle.in_app = self.start_query is not None
        settings = spark_source_settings(
            model,
            self.spark_kafka_options(),
            # a fresh checkpoint reads the job model's partitions from the group's committed
            # offsets, from their log start where it has none; a restarted query reads a
            # partition new to its checkpoint from its log start (Spark ignores startingOffsets
            # once the checkpoint has offsets)
            self.starting_offsets(model),
            self.args.max_records_per_batch,
            options,
            self.consumer_group,
        )
        if any("jaas" in k or "password" in k for k in settings):
            from airflow_samza_expand.spark._kafka_options import REDACTION_REGEX

            self.spark.conf.set("spark.sql.redaction.options.regex", REDACTION_REGEX)
        warn_small_consumer_pool(self.spark, model)
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

    # restarting ------------------------------------------------------------------------------

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
        """Once a newer job model is written and its expansion's barrier has passed, decide the
        restart of the query on it (`restart_due`: the watch lets the running batch finish and
        stops the query; `restart_query` starts it again)."""
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
        """The query ended at a batch boundary (`QueryDriver.watch`); commit its last batch,
        take the newer job model on (offset commits, coverage, the order check of the expansion
        that made it) and call ``start()`` again: same checkpoint, lease, processor and
        application. Heartbeats ``running`` on it (the DAG's acknowledgement)."""
        from airflow_samza_expand.spark._stale import order_check_from_args

        model = self.next_model
        assert model is not None and self.start_query is not None
        # the old query's last batch, fenced by the lease: a lost one raises LeaseLostError and
        # `run` waits for the lease again first (`QueryDriver.resume`), then restarts on it
        self.commit_progress(query)
        if self.order_check is not None:
            self.order_check.close()
        auto = argparse.Namespace(**{**vars(self.args), "barrier_offsets": "auto"})
        # stale placements beyond vN+1's snapshot: Spark's source reads whole ranges, so scan
        self.take_on(model, order_check_from_args(auto, model, self.kafka_config()))
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
        self.lifecycle.heartbeat("running")
        return started


__all__ = ["InAppRestart"]
