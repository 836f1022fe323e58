"""Spark 4 Python streaming data source over confluent-kafka that honours the job model.

* One input partition - one read task - per **SSP** (Kafka partition) of the job model with
  records in the batch, each row with its SSP's job-model task (`spark._source_splits`), at most
  option ``read_cores`` of them (the application's cores, `read_cores_of`: more partitions
  are grouped by task, or packed); option ``max_read_splits`` (> 0) is an explicit cap instead.
* Offsets are JSON ``{"topic": {"partition": next_offset}}`` with sorted keys (as
  ``json.dumps(..., sort_keys=True)`` sorts them), covering every SSP of the job model.
* Replay-safe: a range is read with ``assign()`` at its start offset and stops exactly before
  its end offset, so the same range gives the same records.
* SSPs absent from the start offsets (partitions added by an expansion) start at their log
  start.
* ``commit(end)`` commits ``end`` (the next offset to read of every SSP) for the consumer group
  ``group_id``; a fresh checkpoint starts at that group's committed offsets (log start where
  it has none, `spark._start_position`).
* Admission control: ``max_records_per_batch`` caps a micro-batch, split fairly across SSPs.

Options (all strings): ``job_model`` (JSON), ``bootstrap_servers`` and/or ``kafka_config_file``,
``group_id`` (default: the job name), ``max_records_per_batch`` (0 = no cap), ``stop_gate``
(path of a file whose existence means "admit no more data", used for a clean stop),
``commit_offsets`` ("false": the driver commits after it confirmed the active lease),
``snapshots`` (JSON list of the expansions' barrier snapshots, oldest first) and
``switch_path`` (the file the driver publishes a newer job model in, `spark._switch`) and
``order_check`` (a `spark._stale_batch.StaleRule` as JSON: count stale placements beyond the
barrier snapshot in the batches; a switch brings the new job model's rule) and
``stale_before_path`` (the file holding the rule of the count before an expansion's snapshot,
`spark._stale_before`: stale placements from the growth on, for the barrier) and
``max_read_splits`` (0 = no explicit cap), ``read_cores`` (0 = unknown: one read split per
partition) and ``plan_report`` (a file the reader replaces with each batch's planned splits:
its own report of how many read tasks a batch has).

Switch in place (docs/design.md 'The switch in place'): at each micro-batch's planning the
reader takes a newer job model published in ``switch_path`` (read only when the file changed)
and reads its SSPs from that batch on; a child partition only once the job's position on its
parent reached the snapshot (`core._inplace.readable`), from its log start.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from airflow_samza_expand.core._inplace import readable
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.spark._python_workers import freeze_after_first_task
from airflow_samza_expand.spark._source_read import kafka_client_config, read_ranges, read_split
from airflow_samza_expand.spark._source_splits import (
    Range,
    ReadSplit,
    TaskRange,
    make_splits,
    parse_max_splits,
    plan_choice,
    write_plan_report,
)
from airflow_samza_expand.spark._stale_batch import RuleFile, StaleRule
from airflow_samza_expand.spark._switch import ReaderSwitch

log = logging.getLogger(__name__)

SOURCE_NAME = "samza_kafka"
SOURCE_SCHEMA = StructType(
    [
        StructField("task", StringType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("key", StringType()),
        StructField("value", BinaryType()),
        StructField("timestamp", TimestampType()),
    ]
)
KAFKA_SYSTEM = "kafka"
WATERMARKS_TIMEOUT_S = 60.0  # the driver's watermark reads ride out a leader's move (seconds)

Offsets = dict[str, dict[str, int]]


def offsets_json(offsets: Mapping[str, Mapping[str, int]]) -> Offsets:
    """Canonical offsets: topics and partitions sorted as ``json.dumps(sort_keys=True)`` does."""
    return {t: {p: int(offsets[t][p]) for p in sorted(offsets[t])} for t in sorted(offsets)}


def fair_split(available: Mapping[Any, int], cap: int) -> dict[Any, int]:
    """Share ``cap`` records across SSPs: equal shares, unused shares go to the others."""
    take = {k: 0 for k in available}
    left = {k: v for k, v in available.items() if v > 0}
    budget = cap
    while left and budget > 0:
        share = max(1, budget // len(left))
        for k in sorted(left):
            if budget <= 0:
                break
            n = min(share, left[k], budget)
            take[k] += n
            left[k] -= n
            budget -= n
        left = {k: v for k, v in left.items() if v > 0}
    return take


class SamzaKafkaDataSource(DataSource):
    """``spark.readStream.format("samza_kafka")``: Kafka records by job-model task."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return SOURCE_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return SamzaKafkaStreamReader(schema, dict(self.options))


class SamzaKafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches from Kafka watermarks and reads them per partition."""

    def __init__(self, schema: StructType, options: Mapping[str, str]) -> None:
        self.schema = schema
        self.options = dict(options)
        if "job_model" not in self.options:
            raise ValueError("samza_kafka source needs option 'job_model' (the job model JSON)")
        self.group_id = self.options.get("group_id") or ""
        self.max_records = int(self.options.get("max_records_per_batch") or 0)
        self.stop_gate = self.options.get("stop_gate") or None
        self.commit_offsets = self.options.get("commit_offsets", "true").lower() != "false"
        self.max_splits = parse_max_splits(self.options.get("max_read_splits"))
        self.cores = parse_max_splits(self.options.get("read_cores"), "read_cores")
        self.plan_report = self.options.get("plan_report") or None
        # in place: the expansions' barrier snapshots gate child partitions; a newer job model
        # published by the driver (`spark._switch`) is taken at a batch's planning
        self.snapshots: list[dict] = json.loads(self.options.get("snapshots") or "[]")
        self.switch = ReaderSwitch(self.options.get("switch_path") or None)
        # count stale placements in the batches (`spark._stale_batch`)
        self.order_rule = StaleRule.from_json(self.options.get("order_check"))
        self.before_file = RuleFile(self.options.get("stale_before_path") or None)
        self._use(JobModel.from_json(self.options["job_model"]))
        self._target: Offsets | None = None
        self._consumer: Any = None  # driver-side client, created lazily (never pickled)
        self._admin: Any = None  # driver-side watermark reads, likewise

    def _use(self, model: JobModel) -> None:
        for ssp in model.ssp_to_task:
            if ssp.system != KAFKA_SYSTEM:
                raise ValueError(
                    f"SSP {ssp} is not of system '{KAFKA_SYSTEM}' - this source reads Kafka only"
                )
        self.model = model
        self.group_id = self.group_id or model.job_name
        self.ssps = sorted(
            {(s.stream, s.partition) for ss in model.task_to_ssps().values() for s in ss}
        )

    def _reading(self, start: Mapping[str, Mapping[str, int]]) -> list[tuple[str, int]]:
        """The SSPs to read in the batch after ``start``: switch to a published newer job model
        first; a child partition only once the job's position on its parent reached H."""
        switched = self.switch.poll(self.model.version)
        if switched is not None:
            log.info(
                "switch in place: job model v%d -> v%d", self.model.version, switched[0].version
            )
            self._use(switched[0])
            self.snapshots = switched[1]
            self.order_rule = switched[2]
            self.stop()  # a new client: the old one's metadata has the old partition count
            self.switch.reading(self.model.version)
        if not self.snapshots:
            return self.ssps
        positions = {ssp: _lookup(start, ssp) or 0 for ssp in self.ssps}
        now = readable(self.model.partition_counts(), self.snapshots, positions)
        return [ssp for ssp in self.ssps if ssp in now]

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_consumer"] = state["_admin"] = None
        return state

    # -- driver side ---------------------------------------------------------------------------

    def _driver_consumer(self, renew: bool = False) -> Any:
        """The driver's consumer (watermarks, group commits); ``renew``: a new one."""
        if renew:
            self._close_consumer()
        if self._consumer is None:
            from airflow_samza_expand._kafka.clients import Consumer

            config = kafka_client_config(self.options)
            config.update({"group.id": self.group_id, "enable.auto.commit": "false"})
            self._consumer = Consumer(config)
        return self._consumer

    def _watermarks(
        self, ssps: list[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], tuple[int, int]]:
        """(low, high) of each SSP: a ListOffsets per leader broker and kind, whatever the
        partition count; `KafkaAdmin` asks again what Kafka marks retriable (a leader moved or
        fenced by a broker's restart) until `WATERMARKS_TIMEOUT_S`."""
        wanted = self.ssps if ssps is None else ssps
        topics = {t: [p for u, p in wanted if u == t] for t in dict.fromkeys(t for t, _ in wanted)}
        if self._admin is None:
            from airflow_samza_expand._kafka.admin import KafkaAdmin

            self._admin = KafkaAdmin(
                kafka_client_config(self.options), timeout_s=WATERMARKS_TIMEOUT_S
            )
        try:
            lows = self._admin.low_watermarks(topics)
            highs = self._admin.high_watermarks(topics)
        except Exception as exc:  # noqa: BLE001 - named for the job, with the fix
            self._admin = None  # a new client next time
            raise RuntimeError(
                f"cannot read watermarks of {sorted(topics)} for job {self.model.job_name!r}: "
                f"{exc} - check the topic exists with the job model's partition count and the "
                "brokers are reachable"
            ) from None
        return {(t, p): (lows[t][p], highs[t][p]) for t, p in wanted}

    def initialOffset(self) -> dict:
        """A fresh checkpoint's start: the group's committed offsets, else the log start
        (`spark._start_position`)."""
        from airflow_samza_expand.spark._start_position import group_start_offsets

        marks = self._watermarks()
        starts = group_start_offsets(
            kafka_client_config(self.options), self.group_id, self.model.partition_counts()
        )
        first = {
            ssp: max(low, starts.get(ssp[0], {}).get(ssp[1]) or 0)
            for ssp, (low, _high) in marks.items()
        }
        if first != {ssp: low for ssp, (low, _high) in marks.items()}:
            log.info("a fresh checkpoint starts from group %r's committed offsets", self.group_id)
        return offsets_json(_nest(first))

    def prepareForTriggerAvailableNow(self) -> None:
        marks = self._watermarks()
        self._target = offsets_json(_nest({ssp: high for ssp, (_low, high) in marks.items()}))
        log.info("available-now target offsets: %s", json.dumps(self._target))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.max_records > 0:
            return ReadMaxRows(self.max_records)
        return ReadAllAvailable()

    def _gate_closed(self) -> bool:
        return bool(self.stop_gate) and os.path.exists(self.stop_gate)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        if self._gate_closed():
            log.info("stop requested: admitting no more data after %s", json.dumps(start))
            return start
        reading = self._reading(start)
        marks = self._watermarks(reading)
        begin: dict[tuple[str, int], int] = {}
        available: dict[tuple[str, int], int] = {}
        for ssp in reading:
            low, high = marks[ssp]
            if self._target is not None:
                high = min(high, self._target.get(ssp[0], {}).get(str(ssp[1]), high))
            started = _lookup(start, ssp)
            begin[ssp] = low if started is None else started
            available[ssp] = max(0, high - max(begin[ssp], low))
        if isinstance(limit, ReadMaxRows):
            take = fair_split(available, limit.max_rows)
        else:
            take = available
        # a gated child keeps its start offset (if any): not read before its parent reached H
        end = {ssp: o for ssp in self.ssps if (o := _lookup(start, ssp)) is not None}
        for ssp in reading:
            low = marks[ssp][0]
            end[ssp] = max(begin[ssp], low) + take[ssp] if take[ssp] > 0 else begin[ssp]
        result = offsets_json(_nest(end))
        if result == offsets_json(start):
            return start  # no new data: hand back start as is
        return result

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        known = set(self.ssps)
        for topic, parts in end.items():
            for partition in parts:
                if (topic, int(partition)) not in known:
                    raise RuntimeError(
                        f"batch end offsets name {topic}[{partition}], which job model "
                        f"v{self.model.version} of {self.model.job_name!r} does not read - "
                        "restart with a job model that keeps it, or a new --checkpoint-dir"
                    )
        rule = self.order_rule
        if rule is not None and rule.version != self.model.version:
            rule = None  # the driver scans what no report covers
        before = self.before_file.poll()
        if before is not None and before.version != self.model.version:
            before = None
        ranges: list[TaskRange] = []
        for ssp, task in self.model.ssp_to_task.items():
            key = (ssp.stream, ssp.partition)
            stop = _lookup(end, key)
            if stop is None:
                continue
            # Absent from start: a partition new to the checkpoint, read from its log start
            # (offset 0 resets to the earliest offset when the log starts later).
            begin = _lookup(start, key) or 0
            if stop > begin:
                ranges.append((task, (ssp.stream, ssp.partition, begin, stop)))
        splits = make_splits(ranges, self.max_splits, rule, before, self.cores)
        choice = plan_choice(ranges, self.max_splits, self.cores)
        try:
            write_plan_report(self.plan_report, self.model.version, end, splits, choice)
        except OSError as exc:  # a report, never a reason to fail the batch
            log.warning("plan report %s not written: %s", self.plan_report, exc)
        return list(splits)

    def commit(self, end: dict) -> None:
        if not self.commit_offsets:
            return
        try:
            commit_group_offsets(self._driver_consumer(), end)
        except Exception as exc:  # keep the query alive; the job commits again after a batch
            log.warning("committing offsets of group %r failed: %s", self.group_id, exc)

    def stop(self) -> None:
        self._close_consumer()
        self._admin = None

    def _close_consumer(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            with contextlib.suppress(Exception):  # a client that cannot close is dropped
                consumer.close()

    # -- executor side -------------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator:
        assert isinstance(partition, ReadSplit)
        freeze_after_first_task()  # Spark's per-task collection scans less (spark._python_workers)
        return read_split(self.options, self.group_id, partition, self.schema)


def _nest(flat: Mapping[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    nested: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in flat.items():
        nested.setdefault(topic, {})[str(partition)] = offset
    return nested


def _lookup(offsets: Mapping[str, Mapping[str, int]], ssp: tuple[str, int]) -> int | None:
    value = offsets.get(ssp[0], {}).get(str(ssp[1]))
    return None if value is None else int(value)


def commit_group_offsets(consumer: Any, offsets: Mapping[str, Mapping[str, int]]) -> None:
    """Commit ``offsets`` (next offset to read per SSP) for the consumer's group, synchronously."""
    from confluent_kafka import TopicPartition

    tps = [
        TopicPartition(topic, int(partition), int(offset))
        for topic, parts in sorted(offsets.items())
        for partition, offset in sorted(parts.items())
    ]
    if tps:
        consumer.commit(offsets=tps, asynchronous=False)


# read_ranges, kafka_client_config and Range: importable from here as before
__all__ = [
    "SOURCE_NAME",
    "SOURCE_SCHEMA",
    "Range",
    "ReadSplit",
    "SamzaKafkaDataSource",
    "SamzaKafkaStreamReader",
    "commit_group_offsets",
    "fair_split",
    "kafka_client_config",
    "offsets_json",
    "read_ranges",
]
