"""Entry point of the stateful PySpark job that honours the job model.

Run it as ``python -m airflow_samza_expand.spark.job ...`` or give this file to spark-submit /
``SparkSubmitOperator(application=...)``. Lifecycle:

1. read the newest job model from the coordinator store (refuse to start without one);
2. refuse a checkpoint written under an incompatible task set (`state.check_task_set`);
3. join the job's active lease group and wait as a standby (heartbeat ``standby``, warmed up;
   a ``--standby`` heartbeats ``starting``, role standby, while it warms up) until it holds the
   lease and the newest job model is >= ``--job-model-version`` (`spark._lifecycle`;
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

import json
import logging
import os
import re
import sys
import time
from typing import Any

# Spark runs this file as a script (spark-submit / SparkSubmitOperator(application=...)):
# make the package importable from the checkout it lives in when it is not installed.
if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from airflow_samza_expand.core.errors import ExpansionError  # noqa: E402
from airflow_samza_expand.core.model import JobModel  # noqa: E402
from airflow_samza_expand.spark._args import (  # noqa: E402
    UsageError,
    build_parser,
    parse_trigger,
    validate_args,
)
from airflow_samza_expand.spark._lifecycle import warm_up  # noqa: E402
from airflow_samza_expand.spark._outputs import SUMMARY_SCHEMA, produce_outputs  # noqa: E402
from airflow_samza_expand.spark._python_workers import PYTHON_WORKER_CONF  # noqa: E402
from airflow_samza_expand.spark._source_splits import (  # noqa: E402
    read_cores_of,
    read_plan_report,
)
from airflow_samza_expand.spark.runtime import Job  # noqa: E402

log = logging.getLogger("airflow_samza_expand.spark.job")


def session_conf(args: Any) -> dict[str, str]:
    """The shipped job's Spark settings: its shuffle partitions, no console progress bar, Unix
    domain sockets to the Python workers (`spark._python_workers`); ``--spark-conf`` wins."""
    conf = {
        "spark.sql.shuffle.partitions": str(args.shuffle_partitions),
        "spark.ui.showConsoleProgress": "false",
        **PYTHON_WORKER_CONF,
    }
    for item in args.spark_conf:
        key, _, value = item.partition("=")
        conf[key.strip()] = value.strip()
    return conf


class StreamJob(Job):
    """The shipped job: a keyed processor (``--processor``) on the runtime (`spark.runtime`)."""

    plan_report: str | None = None  # the reader's plan of the newest batch (start_stream)

    # batches ----------------------------------------------------------------------------------

    def on_batch(self, batch_df: Any, batch_id: int) -> None:
        """foreachBatch: confirm the lease, write outputs, heartbeat, look for a stop."""
        started = time.monotonic()
        self.guard(f"writing batch {batch_id}")
        produce = produce_outputs(self.kafka_options, self.args.output_topic)
        summary = batch_df.mapInArrow(produce, SUMMARY_SCHEMA).collect()
        per_task: dict[str, int] = {}
        outputs = 0
        for row in summary:
            per_task[row["task"]] = per_task.get(row["task"], 0) + row["records"]
            outputs += row["outputs"]
        self.batches += 1
        plan = read_plan_report(self.plan_report) if self.plan_report else None
        log.info(
            "batch %d: %d records, %d outputs, per task %s, %s (%.2fs)",
            batch_id,
            sum(per_task.values()),
            outputs,
            json.dumps(dict(sorted(per_task.items()))),
            "read plan unknown"
            if plan is None
            else f"read by {plan['read_tasks']} tasks on job model v{plan['version']}"
            f" ({plan.get('choice') or 'plan unknown'})",
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
        for key, value in session_conf(self.args).items():
            builder = builder.config(key, value)
        self.spark = builder.getOrCreate()
        self.spark.sparkContext.setLogLevel("WARN")
        return self.spark

    def start_stream(self) -> Any:
        """Start the job's query (a method name of its own: `runtime.Job` keeps the function
        a user job hands to ``run`` as the attribute ``start_query``)."""
        from airflow_samza_expand.spark._warmup import stateful_outputs

        self._spark()
        # the reader's own report of each batch's read splits (one read task each), logged
        # with the batch: a grown topic is read by as many tasks as it has partitions
        self.plan_report = os.path.join(self.lifecycle.gate_dir, "read-plan.json")
        records = self.read_kafka(
            source="python",
            plan_report=self.plan_report,
            max_read_splits=str(self.args.max_read_splits),
            read_cores=str(read_cores_of(self.spark)),
        )
        outputs = stateful_outputs(
            records, self.args.processor, self.args.state_buckets, self.args.state_shards
        )
        return (
            outputs.writeStream.foreachBatch(self.on_batch)
            .outputMode("update")
            .option("checkpointLocation", self.args.checkpoint_dir)
            .trigger(**parse_trigger(self.args.trigger))
            .queryName(f"samza_expand_{re.sub(r'[^0-9A-Za-z_]', '_', self.args.job_name)}")
            .start()
        )

    def _warm(self) -> None:
        """A ``--standby`` warms Spark, the stateful pipeline and the source up."""
        from airflow_samza_expand.spark._warmup import warm_up_pipeline, warm_up_source

        args = self.args
        took = warm_up(self._spark(), args.processor)
        took += warm_up_pipeline(
            self._spark(), args.processor, args.state_buckets, args.state_shards
        )
        model = self.lifecycle.store.latest_job_model() or JobModel.initial(
            args.job_name, {"warm-up": 1}
        )
        options = {"job_model": model.to_json(), **self.kafka_options}
        self.spark = self._spark()
        took += warm_up_source(self.spark, self.register_source, options)
        log.info("standby %s warmed up in %.1f s", self.processor_id, took)

    def execute(self) -> int:
        """Run the job: wait as a standby, check the checkpoint, run the query; the exit code."""
        from airflow_samza_expand.spark._state import check_task_set, state_layout, write_task_set

        args = self.args
        model = self.prepare(warm=self._warm)
        if model is None:
            self.lifecycle.heartbeat("stopped")
            log.info("job %r: stop requested while a standby: exiting", args.job_name)
            return 0
        self.start(model)
        layout = state_layout(args.state_buckets, args.state_shards)
        try:
            problems = check_task_set(
                args.checkpoint_dir, model, allow_task_change=args.allow_task_change, layout=layout
            )
        except ValueError as exc:  # e.g. a remote checkpoint URL the guard cannot read
            raise UsageError(str(exc)) from None
        if problems:
            log.warning("--allow-task-change: accepting %s", "; ".join(problems))
        write_task_set(args.checkpoint_dir, model, layout)
        self.begin()  # a cold JVM start takes longer than a short TTL
        # the function, not the started query: fenced by a lost lease (Kafka away past the
        # TTL), the runtime starts it again itself (docs/operations.md, "A broker outage")
        code = self.run(self.start_stream)
        log.info("job %r: %d batches", args.job_name, self.batches)
        return code


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
        return job.execute()
    except (UsageError, ExpansionError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        job.close()


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["StreamJob", "main"]
