"""Sensors of the expansion: ``deferrable=True`` defers to the sensor's trigger (which owns the
loop and its cleanup), ``deferrable=False`` pokes: a poke is one call of the same poll function
the trigger loops over (`trigger.poll(admin, store)`). The default follows Airflow's
``[operators] default_deferrable`` (as the providers' operators do); the DAG factory passes
``deferrable`` itself."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.configuration import conf
from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from airflow_samza_expand._kafka.admin import KafkaUnavailableError
from airflow_samza_expand._protocol.barrier.wait import (
    DEFAULT_BARRIER_TIMEOUT_S,
    DEFAULT_PRODUCER_REFRESH_GRACE_S,
    BarrierWait,
    start_barrier,
)
from airflow_samza_expand._protocol.ownership import take
from airflow_samza_expand._protocol.poll import Reconnect
from airflow_samza_expand._protocol.steps import ack
from airflow_samza_expand.airflow._shell import (
    DEFAULT_CONN_ID,
    KafkaClients,
    holder_of,
    protocol_outcomes,
)
from airflow_samza_expand.airflow._waitlog import WaitLog
from airflow_samza_expand.airflow.hooks import DEFAULT_COORDINATOR
from airflow_samza_expand.airflow.triggers import (
    JobModelAckTrigger,
    OrderingBarrierTrigger,
    PartitionCountChangeTrigger,
    PollingTrigger,
)
from airflow_samza_expand.core._liveness import job_consumer_group
from airflow_samza_expand.core.errors import BarrierTimeoutError


class _WaitSensor(KafkaClients, BaseSensorOperator):
    """Execute = poke once, then keep poking (``deferrable=False``) or defer to `trigger`.

    Subclasses build their trigger (`trigger`) and turn its result into the XCom (`finish`);
    nothing else differs between the sensors."""

    deferrable: bool

    def trigger(self, context: Any) -> PollingTrigger:
        raise NotImplementedError

    def finish(self, context: Any, result: dict[str, Any]) -> Any:
        return result

    def execute(self, context: Any) -> Any:
        self._reconnect = Reconnect()
        self._waits = WaitLog(self.log)  # one line per change of what it waits for
        self._trigger = self.trigger(context)
        try:
            first = self.poke(context)
            if first:
                return self.finish(context, first.xcom_value)
            if not self.deferrable:
                return self.finish(context, super().execute(context))
        finally:
            self.close_clients()
        self.defer(
            trigger=self._trigger,
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def poke(self, context: Any) -> PokeReturnValue | bool:
        polled_at = time.time()  # time out only after a poll that began past the deadline
        deadline = self._reconnect.begin(polled_at, self._trigger.deadline)  # outages don't count
        if deadline is not None:
            self._trigger.deadline = deadline
        try:
            with protocol_outcomes():
                progress = self._trigger.poll(self.admin, self.store if self.job_name else None)
            self._reconnect.ok()
        except KafkaUnavailableError as exc:
            self.log.warning("Poll failed (will retry): %s", exc)
            if self._reconnect.failed():
                self.close_clients()
            progress = None
        if progress is not None and progress.done:
            self.log.info("%s", progress.message)
            return PokeReturnValue(True, self.on_event(context, self._trigger.event(progress)))
        if progress is not None:
            self._waits.info(progress.message, key=progress.log_key)
        if progress is not None and deadline is not None and polled_at >= deadline:
            self.on_event(context, self._trigger.timeout_event(progress))
        return False

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        return self.finish(context, self.on_event(context, event))

    def on_event(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        status = event.get("status")
        if status == "refused":
            raise AirflowFailException(event.get("error"))
        if status == "lost":
            raise AirflowSkipException(
                f"another run owns this job's expansion: {event.get('error')}"
            )
        return event


class OrderingBarrierSensor(_WaitSensor):
    """The ordering barrier (docs/design.md 'The ordering barrier'), for expansion ``expansion_id``:

    1. wait ``producer_refresh_grace_s`` after the expansion (producers still using the old
       count keep writing to old partitions until their metadata refreshes);
    2. snapshot the high watermark of every old partition and store it in the expansion
       record (a rerun reuses the same barrier);
    3. wait until the job's consumer group (default: the job name) has committed offsets
       ``>=`` the snapshot on every old partition. Each poll logs the lag per partition.

    Stale placements (docs/design.md): the snapshot waits, after the grace, for ``stale_quiet_s``
    (None: the protocol's default, min(30 s, grace)) without a stale placement in the old
    partitions; stale placements still arriving at the deadline (``barrier_timeout_s`` after
    the later of the
    wait's start and the grace's end, `_protocol.barrier.wait.barrier_deadline`, one rule for poke
    and deferred mode) fail it with a ``BarrierTimeoutError`` naming them.

    ``snapshot_only`` (available-now mode) returns once the snapshot is taken. Returns
    ``{barrier_offsets, seconds_waited, lag_drained, snapshot_at, passed_at, ...}``. Not passed
    within ``barrier_timeout_s`` after the grace: ``AirflowFailException``
    (``BarrierTimeoutError``). ``deferrable`` defaults to ``[operators] default_deferrable``.
    """

    template_fields: Sequence[str] = (
        "job_name",
        "expansion_id",
        "consumer_group",
        "coordinator",
        "producer_refresh_grace_s",
        "barrier_timeout_s",
        "stale_quiet_s",
    )
    ui_color = "#fff3c9"

    def __init__(
        self,
        *,
        job_name: str,
        expansion_id: str,
        consumer_group: str | None = None,
        producer_refresh_grace_s: float | str = DEFAULT_PRODUCER_REFRESH_GRACE_S,
        barrier_timeout_s: float | str = DEFAULT_BARRIER_TIMEOUT_S,
        snapshot_only: bool = False,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        coordinator: str = DEFAULT_COORDINATOR,
        kafka_config_id: str = DEFAULT_CONN_ID,
        request_timeout_s: float = 30.0,
        poke_interval: float = 10.0,
        stale_quiet_s: float | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(poke_interval=poke_interval, **kwargs)
        self.job_name = job_name
        self.expansion_id = expansion_id
        self.stale_quiet_s = stale_quiet_s
        self.consumer_group = consumer_group
        self.producer_refresh_grace_s = producer_refresh_grace_s
        self.barrier_timeout_s = barrier_timeout_s
        self.snapshot_only = snapshot_only
        self.deferrable = deferrable and not snapshot_only
        self.coordinator = coordinator
        self.kafka_config_id = kafka_config_id
        self.request_timeout_s = request_timeout_s

    def trigger(self, context: Any) -> OrderingBarrierTrigger:
        wait = BarrierWait(
            expansion_id=self.expansion_id,
            group=self._group(),
            grace_s=float(self.producer_refresh_grace_s),
            stale_quiet_s=self._stale_quiet_s(),
            timeout_s=float(self.barrier_timeout_s),
            holder=holder_of(context),
            snapshot_only=self.snapshot_only,
        )
        started = time.time()
        if self.reschedule and context.get("ti") is not None:
            first = context["ti"].get_first_reschedule_date(context)
            started = first.timestamp() if first is not None else started
        with protocol_outcomes():
            deadline = start_barrier(self.store, wait, started)
        return OrderingBarrierTrigger(
            job_name=self.job_name,
            expansion_id=wait.expansion_id,
            consumer_group=wait.group,
            producer_refresh_grace_s=wait.grace_s,
            stale_quiet_s=wait.stale_quiet_s,
            deadline=deadline,
            snapshot_only=wait.snapshot_only,
            poll_interval_s=self.poke_interval,
            holder=wait.holder,
            coordinator=self.coordinator,
            kafka_config_id=self.kafka_config_id,
            request_timeout_s=self.request_timeout_s,
        )

    def poke(self, context: Any) -> PokeReturnValue | bool:
        if not self.snapshot_only:
            return super().poke(context)
        with protocol_outcomes():  # the wait ends at the snapshot; its own deadline refuses
            progress = self._trigger.poll(self.admin, self.store)
        if progress.done:
            self.log.info("%s", progress.message)
        else:
            self._waits.info(progress.message, key=progress.log_key)
        return PokeReturnValue(True, progress.result) if progress.done else False

    def _group(self) -> str:
        """The job's consumer group: ``consumer_group``, else the one its processors advertise,
        else the job name."""
        return job_consumer_group(self.job_name, self.store.processors(), self.consumer_group)

    def _stale_quiet_s(self) -> float | None:
        """``stale_quiet_s`` rendered: None (or "None", "") = the barrier's default."""
        if self.stale_quiet_s in (None, "", "None"):
            return None
        quiet = float(self.stale_quiet_s)  # type: ignore[arg-type]
        if quiet < 0:
            raise AirflowFailException(f"stale_quiet_s must be >= 0, got {quiet}")
        return quiet

    def on_event(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        event = super().on_event(context, event)
        if event.get("status") == "timeout":
            error = BarrierTimeoutError(
                f"group {self._group()!r} did not commit past the barrier "
                f"of expansion {self.expansion_id!r} within {float(self.barrier_timeout_s):.0f} "
                f"s; lag left: {event.get('lag', 'unknown')} - check that the job runs and keeps "
                "up, then clear the task (the same barrier is reused)"
            )
            raise AirflowFailException(f"BarrierTimeoutError: {error}")
        return event.get("result", event)


class JobModelAckSensor(_WaitSensor):
    """Waits until ``min_processors`` processors of the job heartbeat ``running`` job model
    ``version`` (default: the newest version in the store). With ``expansion_id`` the
    acknowledgement is noted in the expansion record; ``accept_stopped`` (available-now mode)
    counts a clean ``stopped`` on that version too. Returns
    ``{version, running: [ids], others: {id: state}}``. Defers (``deferrable``, default
    ``[operators] default_deferrable``) to ``JobModelAckTrigger``."""

    template_fields: Sequence[str] = ("job_name", "version", "coordinator", "expansion_id")

    def __init__(
        self,
        *,
        job_name: str,
        version: int | str | None = None,
        min_processors: int = 1,
        expansion_id: str | None = None,
        accept_stopped: bool = False,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
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
        self.expansion_id = expansion_id
        self.accept_stopped = accept_stopped
        self.deferrable = deferrable and not accept_stopped
        self.coordinator = coordinator
        self.kafka_config_id = kafka_config_id
        self.request_timeout_s = request_timeout_s

    def trigger(self, context: Any) -> JobModelAckTrigger:
        if self.version not in (None, "", "None"):
            version = int(self.version)
        else:
            with protocol_outcomes():
                latest = self.store.latest_job_model()
            if latest is None:
                raise AirflowFailException(
                    f"job {self.job_name!r} has no job model to acknowledge - pass version="
                )
            version = latest.version
        return JobModelAckTrigger(
            job_name=self.job_name,
            version=version,
            min_processors=self.min_processors,
            poll_interval_s=self.poke_interval,
            accept_stopped=self.accept_stopped,
            holder=holder_of(context) if self.expansion_id else None,
            expansion_id=str(self.expansion_id) if self.expansion_id else None,
            coordinator=self.coordinator,
            kafka_config_id=self.kafka_config_id,
            request_timeout_s=self.request_timeout_s,
        )

    def finish(self, context: Any, result: dict[str, Any]) -> Any:
        info = {k: v for k, v in result.items() if k != "status"}
        if self.expansion_id:
            try:
                with protocol_outcomes():
                    lease = take(self.store, holder_of(context))
                    ack.record_ack(self.store, str(self.expansion_id), info, lease)
            finally:
                self.close_clients()
        return info


class PartitionCountSensor(_WaitSensor):
    """Waits until ``topic``'s partition count differs from ``baseline`` (``None``: the count at
    the first poke). Returns ``{topic, baseline, partition_count}``. Defers (``deferrable``,
    default ``[operators] default_deferrable``) to ``PartitionCountChangeTrigger``."""

    template_fields: Sequence[str] = ("topic", "baseline")

    def __init__(
        self,
        *,
        topic: str,
        baseline: int | str | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
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

    def trigger(self, context: Any) -> PartitionCountChangeTrigger:
        return PartitionCountChangeTrigger(
            topic=self.topic,
            baseline=None if self.baseline in (None, "") else int(self.baseline),
            poll_interval_s=self.poke_interval,
            kafka_config_id=self.kafka_config_id,
            request_timeout_s=self.request_timeout_s,
        )


__all__ = ["JobModelAckSensor", "OrderingBarrierSensor", "PartitionCountSensor"]
