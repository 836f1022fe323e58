"""ExpandPartitionsOperator: grow one topic by a power of two, idempotently."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_samza_expand.airflow.hooks import DEFAULT_COORDINATOR, open_clients
from airflow_samza_expand.airflow.operators._common import (
    DEFAULT_CONN_ID,
    close_quietly,
    refusals_fail_task,
    require_expansion,
    update_expansion,
    utc_now_iso,
)
from airflow_samza_expand.core.errors import InvalidGrowthError
from airflow_samza_expand.core.expansion import validate_growth
from airflow_samza_expand.kafka.admin import KafkaUnavailableError


class ExpandPartitionsOperator(BaseOperator):
    """Grow ``topic`` to ``target_partitions`` (or its baseline count times ``factor``).

    * Already at the target: success, nothing changed (a rerun after success is a no-op).
    * At the baseline: CreatePartitions; if that times out, the count is re-read - the growth
      may have been applied - before the task fails for a retry.
    * At any other count, a shrink, or (``require_power_of_two``) a non power-of-two growth:
      ``AirflowFailException``, nothing changed.

    The baseline (the count before the expansion) comes from the expansion record
    (``expansion_id``), else the job's newest job model (``job_name``), else the live count.
    Only the first two keep ``factor`` idempotent across retries; ``target_partitions`` always is.
    ``dry_run`` asks the broker to validate the growth without applying it.
    Returns ``{topic, partitions_before, partitions_after, changed, dry_run, expansion_id}``.
    """

    template_fields: Sequence[str] = (
        "topic",
        "factor",
        "target_partitions",
        "job_name",
        "expansion_id",
        "coordinator",
    )
    ui_color = "#c9e4ff"

    def __init__(
        self,
        *,
        topic: str,
        factor: int | str | None = None,
        target_partitions: int | str | None = None,
        require_power_of_two: bool = True,
        dry_run: bool = False,
        job_name: str | None = None,
        expansion_id: str | None = None,
        coordinator: str = DEFAULT_COORDINATOR,
        kafka_config_id: str = DEFAULT_CONN_ID,
        request_timeout_s: float = 30.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if (factor is None) == (target_partitions is None):
            raise ValueError(
                f"{self.task_id}: pass exactly one of factor=2 or target_partitions=<count> "
                f"(got factor={factor!r}, target_partitions={target_partitions!r})"
            )
        if expansion_id is not None and job_name is None:
            raise ValueError(f"{self.task_id}: expansion_id needs job_name (whose store holds it)")
        self.topic = topic
        self.factor = factor
        self.target_partitions = target_partitions
        self.require_power_of_two = require_power_of_two
        self.dry_run = dry_run
        self.job_name = job_name
        self.expansion_id = expansion_id
        self.coordinator = coordinator
        self.kafka_config_id = kafka_config_id
        self.request_timeout_s = request_timeout_s

    def execute(self, context: Any) -> dict[str, Any]:
        admin, store = open_clients(
            self.kafka_config_id, self.job_name, self.coordinator, timeout_s=self.request_timeout_s
        )
        try:
            with refusals_fail_task():
                return self._expand(admin, store)
        finally:
            close_quietly(admin, store)

    def _expand(self, admin: Any, store: Any) -> dict[str, Any]:
        topic = self.topic
        current = admin.partition_counts([topic])[topic]
        baseline, source = self._baseline(store, current)
        target = self._target(baseline, store)
        if not (source == "live count" and current == target):
            validate_growth(topic, baseline, target, require_power_of_two=self.require_power_of_two)
        result = {
            "topic": topic,
            "partitions_before": baseline,
            "partitions_after": target,
            "changed": False,
            "dry_run": bool(self.dry_run),
            "expansion_id": self.expansion_id,
        }
        if current == target:
            self.log.info(
                "Topic %s already has %d partitions (the target; baseline %d from %s): "
                "nothing to change.",
                topic,
                target,
                baseline,
                source,
            )
            self._record(store, target, changed=False)
            return result
        if current != baseline:
            raise InvalidGrowthError(
                f"topic {topic!r} has {current} partitions, but the expansion goes from "
                f"{baseline} ({source}) to {target}: someone else changed the topic - "
                "plan the expansion again from the current state"
            )
        if self.dry_run:
            admin.create_partitions(topic, target, validate_only=True)
            self.log.info(
                "Dry run: the broker accepts growing %s from %d to %d partitions; not applied.",
                topic,
                current,
                target,
            )
            return result
        self.log.info("Growing topic %s from %d to %d partitions.", topic, current, target)
        try:
            admin.create_partitions(topic, target)
        except (KafkaUnavailableError, InvalidGrowthError) as exc:
            # A timeout may hide an applied growth; INVALID_PARTITIONS may mean a concurrent
            # retry applied it first. Either way the count decides.
            self.log.warning("CreatePartitions on %s did not confirm (%s); re-reading.", topic, exc)
            now = admin.partition_counts([topic])[topic]
            if now != target:
                self.log.error(
                    "Topic %s still has %d partitions (target %d): failing for a retry.",
                    topic,
                    now,
                    target,
                )
                raise
            self.log.info("Topic %s has %d partitions: the growth was applied.", topic, now)
        self._record(store, target, changed=True)
        result["changed"] = True
        return result

    def _baseline(self, store: Any, current: int) -> tuple[int, str]:
        """The topic's count before the expansion, and where it came from."""
        if self.expansion_id:
            record = require_expansion(store, self.expansion_id, self.job_name or "")
            before = record.get("counts_before", {})
            if self.topic not in before:
                raise AirflowFailException(
                    f"expansion {self.expansion_id!r} does not grow topic {self.topic!r} "
                    f"(it grows {', '.join(sorted(before)) or 'nothing'})"
                    " - pass one of those topics"
                )
            return int(before[self.topic]), f"expansion {self.expansion_id}"
        if store is not None:
            model = store.latest_job_model()
            if model is not None and self.topic in model.partition_counts():
                return model.partition_counts()[self.topic], f"job model v{model.version}"
        if self.factor is not None:
            self.log.warning(
                "factor=%s without expansion_id/job model: the baseline is the live count %d, so "
                "a retry after a successful growth would grow again - prefer target_partitions.",
                self.factor,
                current,
            )
        return current, "live count"

    def _target(self, baseline: int, store: Any) -> int:
        if self.target_partitions is not None:
            target = _as_int(self.target_partitions, "target_partitions")
        else:
            target = baseline * _as_int(self.factor, "factor")
        if self.expansion_id:
            record = require_expansion(store, self.expansion_id, self.job_name or "")
            planned = int(record.get("counts_after", {}).get(self.topic, target))
            if planned != target:
                raise InvalidGrowthError(
                    f"expansion {self.expansion_id!r} plans {self.topic!r} at {planned} "
                    f"partitions, but this task asks for {target} - use the planned count"
                )
        return target

    def _record(self, store: Any, count: int, *, changed: bool) -> None:
        if store is None or not self.expansion_id:
            return
        record = require_expansion(store, self.expansion_id, self.job_name or "")
        expanded = dict(record.get("expanded", {}))
        if self.topic not in expanded:
            expanded[self.topic] = {"partitions": count, "at": utc_now_iso(), "applied": changed}
        changes: dict[str, Any] = {"expanded": expanded}
        if set(expanded) >= set(record.get("counts_after", {})):
            changes.setdefault("expanded_at", record.get("expanded_at") or utc_now_iso())
            changes["status"] = record.get("status") if record.get("barrier") else "expanded"
        update_expansion(store, self.expansion_id, **changes)


def _as_int(value: Any, name: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise AirflowFailException(f"{name} must be an integer, got {value!r}") from None
