"""The switch in place, job side (its Airflow side: `_protocol.restart.in_place`; docs/design.md,
"The switch in place"): reading with the provider's reader (``source="python"``), publishing a
newer job model to it and taking the model on once the reader plans batches on it.

* `InPlaceSwitch.read_python_source` - the provider's data source (`spark._source`) on the job
  model; the processor advertises ``in-place`` and counts stale placements for the barrier.
* `InPlaceSwitch.python_source_options` - the reader's options: the job model, the snapshots it
  gates children with, the switch file (`spark._switch.SwitchPublisher`), the stale count
  before a snapshot (`spark._stale_before`), the stop gate, the group and Kafka settings.
* `InPlaceSwitch.poll_in_place` - at each poll: count an expansion in progress, publish a newer
  job model, and once the reader reads it, take it on (offset commits, coverage, the order
  check) and heartbeat ``running`` on it (the DAG's acknowledgement).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.spark._driving import QueryDriver

log = logging.getLogger("airflow_samza_expand.spark.runtime")


class InPlaceSwitch(QueryDriver):
    """The in-place side of `spark.runtime.Job` (module docstring)."""

    spark: Any
    kafka_options: dict[str, str]
    source_registered: bool = False
    switch: Any = None  # spark._switch.SwitchPublisher, with the provider's reader
    take_on: Callable[[JobModel, Any], None]  # `spark._startup.StartUp.take_on`

    def read_python_source(self, model: JobModel, options: Mapping[str, str]) -> Any:
        """The provider's reader on ``model`` (module docstring)."""
        from airflow_samza_expand.spark._python_workers import warn_without_unix_sockets
        from airflow_samza_expand.spark._source_splits import read_cores_of

        self.register_source()
        warn_without_unix_sockets(self.spark)
        settings = self.python_source_options(model)
        options = {"read_cores": str(read_cores_of(self.spark)), **options}  # the job's own wins
        self.lifecycle.in_place = True  # this query can switch in place
        self.lifecycle.counts_stale = True  # ... and count stale placements for the barrier
        return self.spark.readStream.format("samza_kafka").options(**settings, **options).load()

    def register_source(self) -> None:
        """Register the provider's data source with the session (once)."""
        if not self.source_registered:
            from airflow_samza_expand.spark._source import SamzaKafkaDataSource

            self.spark.dataSource.register(SamzaKafkaDataSource)
            self.source_registered = True

    def python_source_options(self, model: JobModel) -> dict[str, str]:
        """The options of the provider's reader on ``model`` (module docstring)."""
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
            "stop_gate": life.gate_path,
            "order_check": check.rule.to_json() if check and check.rule else "",
            "stale_before_path": before_path,
            # under the lease the driver commits, after confirming it (fencing a zombie)
            "commit_offsets": "false" if life.use_lease else "true",
            **self.kafka_options,
        }

    def poll_in_place(self) -> None:
        """Publish a newer job model to the reader; once the reader plans batches on it, take it
        on here and heartbeat ``running`` on it. Also count an expansion in progress before its
        snapshot (`spark._stale_before`)."""
        from airflow_samza_expand.spark._stale import order_check_after_switch

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
        log.info("job %r: processor %s reads job model v%d now (in place)",
                 self.args.job_name, self.processor_id, version)  # fmt: skip
        # stale placements beyond vN+1's snapshot
        check = order_check_after_switch(
            self.args, model, self.kafka_config(), life.report_dir, self.order_check
        )
        self.take_on(model, check)
        life.heartbeat("running")


__all__ = ["InPlaceSwitch"]
