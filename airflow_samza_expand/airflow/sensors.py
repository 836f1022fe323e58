"""Sensors of the expansion: deferrable by default (their triggers), or ``deferrable=False``
for a poke mode that runs the same step functions (``waits.py``) in the worker."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowException, AirflowFailException
from airflow.triggers.base import BaseTrigger

from airflow_samza_expand.airflow.hooks import DEFAULT_COORDINATOR, open_clients
from airflow_samza_expand.airflow.operators._common import (
    DEFAULT_CONN_ID,
    close_quietly,
    refusals_fail_task,
)
from airflow_samza_expand.airflow.triggers import (
    JobModelAckTrigger,
    OrderingBarrierTrigger,
    PartitionCountChangeTrigger,
)
from airflow_samza_expand.airflow.waits import (
    DEFAULT_PRODUCER_REFRESH_GRACE_S,
    ack_poll,
    barrier_grace_until,
    barrier_poll,
    describe_lag,
    partition_count_or_zero,
)
from airflow_samza_expand.core.errors import BarrierTimeoutError
from airflow_samza_expand.kafka.admin import KafkaUnavailableError


class _ClientsMixin:
    """Clients opened on the first poke and closed when the task ends (poke mode), and the
    execute every sensor here shares: prepare, poke once, then keep poking (``deferrable=False``)
    or hand the wait to the sensor's trigger."""

    kafka_config_id: str
    request_timeout_s: float
    deferrable: bool

    def _prepare(self, context: Any) -> None:
        """Resolve what the pokes and the trigger need (runs with the clients open)."""

    def _trigger(self) -> BaseTrigger:
        raise NotImplementedError

    def execute(self, context: Any) -> Any:
        try:
            self._prepare(context)
            first = self.poke(context)  # type: ignore[attr-defined]
            if first:
                return first.xcom_value
            if not self.deferrable:
                return super().execute(context)  # type: ignore[misc]
        finally:
            self._close_clients()
        self.defer(  # type: ignore[attr-defined]
            trigger=self._trigger(),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),  # type: ignore[attr-defined]
        )

    def _clients(self, job_name: str | None, coordinator: str = DEFAULT_COORDINATOR):
        if getattr(self, "_open_clients", None) is None:
            self._open_clients = open_clients(
                self.kafka_config_id, job_name, coordinator, timeout_s=self.request_timeout_s
            )
        return self._open_clients

    def _poll_failed(self, exc: Exception) -> None:
        """Log a transient poll failure; after 3 in a row, drop the clients to reconnect."""
        self._failures = getattr(self, "_failures", 0) + 1
        self.log.warning("Poll failed (%d in a row, will retry): %s", self._failures, exc)  # type: ignore[attr-defined]
        if self._failures % 3 == 0:
            self._close_clients()

    def _close_clients(self) -> None:
        clients = getattr(self, "_open_clients", None)
        if clients is not None:
            close_quietly(*clients)
        self._open_clients = None


class OrderingBarrierSensor(_ClientsMixin, BaseSensorOperator):
    """The ordering barrier of DESIGN.md section 1, for expansion ``expansion_id``:

    1. wait ``producer_refresh_grace_s`` after the expansion (producers still using the old
       count keep writing to old partitions until their metadata refreshes);
    2. snapshot the high watermark of every old partition and store it in the expansion
       record (a rerun reuses the same barrier);
    3. wait until the job's consumer group (default: the job name) has committed offsets
       ``>=`` the snapshot on every old partition. Each poll logs the lag per partition.

    Returns ``{barrier_offsets, seconds_waited, lag_drained, snapshot_at, passed_at, ...}``.
    Not passed within ``barrier_timeout_s`` after the grace: ``AirflowFailException``
    (``BarrierTimeoutError``). Deferrable by default; ``deferrable=False`` pokes.
    """

    template_fields: Sequence[str] = ("job_name", "expansion_id", "consumer_group", "coordinator")
    ui_color = "#fff3c9"

    def __init__(
        self,
        *,
        job_name: str,
        expansion_id: str,
        consumer_group: str | None = None,
        producer_refresh_grace_s: float = DEFAULT_PRODUCER_REFRESH_GRACE_S,
        barrier_timeout_s: float = 3600.0,
        deferrable: bool = True,
        coordinator: str = DEFAULT_COORDINATOR,
        kafka_config_id: str = DEFAULT_CONN_ID,
        request_timeout_s: float = 30.0,
        poke_interval: float = 10.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(poke_interval=poke_interval, **kwargs)
        self.job_name = job_name
        self.expansion_id = expansion_id
        self.consumer_group = consumer_group
        self.producer_refresh_grace_s = producer_refresh_grace_s
        self.barrier_timeout_s = barrier_timeout_s
        self.deferrable = deferrable
        self.coordinator = coordinator
        self.kafka_config_id = kafka_config_id
        self.request_timeout_s = request_timeout_s
        self._grace_until: float | None = None
        self._deadline: float | None = None

    @property
    def group(self) -> str:
        return self.consumer_group or self.job_name

    def _prepare(self, context: Any) -> None:
        with refusals_fail_task():
            _, store = self._clients(self.job_name, self.coordinator)
            self._grace_until = barrier_grace_until(
                store, self.expansion_id, self.job_name, self.producer_refresh_grace_s
            )
        self._deadline = max(self._started_at(context), self._grace_until) + float(
            self.barrier_timeout_s
        )

    def _trigger(self) -> BaseTrigger:
        return OrderingBarrierTrigger(
            job_name=self.job_name,
            expansion_id=self.expansion_id,
            consumer_group=self.group,
            producer_refresh_grace_s=self.producer_refresh_grace_s,
            deadline=self._deadline,
            poll_interval_s=self.poke_interval,
            coordinator=self.coordinator,
            kafka_config_id=self.kafka_config_id,
            request_timeout_s=self.request_timeout_s,
        )

    def _started_at(self, context: Any) -> float:
        """When this try started waiting: the first reschedule in reschedule mode, else now."""
        if self.reschedule:
            ti = context.get("ti")
            first = ti.get_first_reschedule_date(context) if ti is not None else None
            if first is not None:
                return first.timestamp()
        return time.time()

    def poke(self, context: Any) -> PokeReturnValue | bool:
        admin, store = self._clients(self.job_name, self.coordinator)
        try:
            with refusals_fail_task():
                progress = barrier_poll(
                    admin,
                    store,
                    expansion_id=self.expansion_id,
                    job_name=self.job_name,
                    group=self.group,
                    grace_until=self._grace_until or 0.0,
                )
        except KafkaUnavailableError as exc:
            self._poll_failed(exc)
            progress = None
        if progress is not None and progress.phase == "holds":
            self.log.info("Ordering barrier of %s holds: %s", self.expansion_id, progress.result)
            return PokeReturnValue(True, progress.result)
        if progress is not None and progress.phase == "grace":
            self.log.info(
                "Waiting for producers to refresh metadata after expansion %s: %.0f s of grace "
                "left.",
                self.expansion_id,
                progress.grace_left_s,
            )
            return False
        if progress is not None:
            self.log.info(
                "Waiting for group %s to commit past barrier %s: total lag %d (%s).",
                self.group,
                self.expansion_id,
                progress.total_lag,
                describe_lag(progress.lag),
            )
        if self._deadline is not None and time.time() >= self._deadline:
            lag = describe_lag(progress.lag) if progress else "unknown"
            raise _barrier_timeout(self.expansion_id, self.group, self.barrier_timeout_s, lag)
        return False

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        status = event.get("status")
        if status == "holds":
            self.log.info("Ordering barrier of %s holds: %s", self.expansion_id, event["result"])
            return event["result"]
        if status == "timeout":
            raise _barrier_timeout(
                self.expansion_id, self.group, self.barrier_timeout_s, event.get("lag", "unknown")
            )
        if status == "refused":
            raise AirflowFailException(event.get("error"))
        raise AirflowException(f"unexpected barrier trigger event {event!r}")


def _barrier_timeout(
    expansion_id: str, group: str, timeout_s: float, lag: str
) -> AirflowFailException:
    error = BarrierTimeoutError(
        f"group {group!r} did not commit past the barrier of expansion {expansion_id!r} within "
        f"{timeout_s:.0f} s; lag left: {lag} - check that the job runs and keeps up, then clear "
        "the task (the same barrier is reused)"
    )
    return AirflowFailException(f"BarrierTimeoutError: {error}")


class JobModelAckSensor(_ClientsMixin, BaseSensorOperator):
    """Waits until ``min_processors`` processors of the job heartbeat ``running`` job model
    ``version`` (default: the newest version in the store). Returns
    ``{version, running: [ids], others: {id: state}}``. Deferrable by default."""

    template_fields: Sequence[str] = ("job_name", "version", "coordinator")

    def __init__(
        self,
        *,
        job_name: str,
        version: int | str | None = None,
        min_processors: int = 1,
        deferrable: bool = True,
        coordinator: str = DEFAULT_COORDINATOR,
        kafka_config_id: str = DEFAULT_CONN_ID,
        request_timeout_s: float = 30.0,
        poke_interval: float = 5.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(poke_interval=poke_interval, **kwargs)
        self.job_name = job_name
        self.version = version
        self.min_processors = min_processors
        self.deferrable = deferrable
        self.coordinator = coordinator
        self.kafka_config_id = kafka_config_id
        self.request_timeout_s = request_timeout_s
        self._version: int | None = None

    def _prepare(self, context: Any) -> None:
        _, store = self._clients(self.job_name, self.coordinator)
        if self.version not in (None, ""):
            self._version = int(self.version)
            return
        with refusals_fail_task():
            latest = store.latest_job_model()
        if latest is None:
            raise AirflowFailException(
                f"job {self.job_name!r} has no job model to acknowledge - pass version="
            )
        self._version = latest.version

    def _trigger(self) -> BaseTrigger:
        return JobModelAckTrigger(
            job_name=self.job_name,
            version=self._version,
            min_processors=self.min_processors,
            poll_interval_s=self.poke_interval,
            coordinator=self.coordinator,
            kafka_config_id=self.kafka_config_id,
            request_timeout_s=self.request_timeout_s,
        )

    def poke(self, context: Any) -> PokeReturnValue | bool:
        _, store = self._clients(self.job_name, self.coordinator)
        try:
            with refusals_fail_task():
                done, info = ack_poll(store, self._version, self.min_processors)
        except KafkaUnavailableError as exc:
            self._poll_failed(exc)
            return False
        if done:
            self.log.info(
                "Job %s runs job model v%d: %s", self.job_name, self._version, info["running"]
            )
            return PokeReturnValue(True, info)
        self.log.info(
            "Waiting for %d processor(s) of %s to run job model v%d: running %s, others %s.",
            self.min_processors,
            self.job_name,
            self._version,
            info["running"] or "none",
            info["others"] or "none",
        )
        return False

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        if event.get("status") != "acknowledged":
            raise AirflowException(f"unexpected acknowledgement trigger event {event!r}")
        info = {k: v for k, v in event.items() if k != "status"}
        self.log.info(
            "Job %s runs job model v%s: %s", self.job_name, info.get("version"), info.get("running")
        )
        return info


class PartitionCountSensor(_ClientsMixin, BaseSensorOperator):
    """Waits until ``topic``'s partition count differs from ``baseline`` (``None``: the count at
    the first poke). Returns ``{topic, baseline, partition_count}``. Deferrable by default
    (``PartitionCountChangeTrigger``)."""

    template_fields: Sequence[str] = ("topic", "baseline")

    def __init__(
        self,
        *,
        topic: str,
        baseline: int | str | None = None,
        deferrable: bool = True,
        kafka_config_id: str = DEFAULT_CONN_ID,
        request_timeout_s: float = 30.0,
        poke_interval: float = 30.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(poke_interval=poke_interval, **kwargs)
        self.topic = topic
        self.baseline = baseline
        self.deferrable = deferrable
        self.kafka_config_id = kafka_config_id
        self.request_timeout_s = request_timeout_s
        self._baseline: int | None = None

    def _prepare(self, context: Any) -> None:
        self._baseline = None if self.baseline in (None, "") else int(self.baseline)

    def _trigger(self) -> BaseTrigger:
        return PartitionCountChangeTrigger(
            topic=self.topic,
            baseline=self._baseline,
            poll_interval_s=self.poke_interval,
            kafka_config_id=self.kafka_config_id,
            request_timeout_s=self.request_timeout_s,
        )

    def poke(self, context: Any) -> PokeReturnValue | bool:
        admin, _ = self._clients(None)
        try:
            count = partition_count_or_zero(admin, self.topic)
        except KafkaUnavailableError as exc:
            self._poll_failed(exc)
            return False
        if self._baseline is None:
            self._baseline = count
            self.log.info("Watching %s: baseline %d partitions.", self.topic, count)
            return False
        if count != self._baseline:
            result = {"topic": self.topic, "baseline": self._baseline, "partition_count": count}
            self.log.info(
                "Topic %s went from %d to %d partitions.", self.topic, self._baseline, count
            )
            return PokeReturnValue(True, result)
        self.log.info("Waiting for %s to leave %d partitions.", self.topic, count)
        return False

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        self.log.info("Topic %s changed: %s", self.topic, event)
        return event
