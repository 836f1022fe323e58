"""Starting a processor of a job on the runtime (`spark.runtime.attach`, and the shipped
`spark.job`): open the coordinator store, heartbeat, join the job's active lease and wait as a
warm standby (`prepare`), check the input and output topics, then take the job model on
(`start`, `take_on`, which the switch in place and the in-app restart reuse for a newer one)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from airflow_samza_expand.core._liveness import ROLE_STANDBY
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.spark._args import UsageError
from airflow_samza_expand.spark._driving import QueryDriver
from airflow_samza_expand.spark._lifecycle import Lifecycle

log = logging.getLogger("airflow_samza_expand.spark.runtime")


class StartUp(QueryDriver):
    """The start of `spark.runtime.Job` (module docstring)."""

    life: Lifecycle | None
    output_topic: str | None

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
        try:
            check = order_check_from_args(
                self.args, model, self.kafka_config(), report_dir=self.lifecycle.report_dir
            )
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        self.take_on(model, check)

    def take_on(self, model: JobModel, order_check: Any) -> None:
        """Run ``model`` from now (at the start, a switch in place, an in-app restart): offset
        commits, the coverage watch and ``order_check`` (its counts go into the heartbeat)."""
        from airflow_samza_expand.spark import _coverage

        life = self.lifecycle
        self.model = model
        life.version = model.version
        life.coverage = _coverage.CoverageWatch(
            model.partition_counts(),
            model.version,
            _coverage.admin_live_counts(self.kafka_config()),
        )
        self.order_check = life.order_check = order_check

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


__all__ = ["StartUp"]
