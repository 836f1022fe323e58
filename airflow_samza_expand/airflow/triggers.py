"""Async triggers of the expansion. Each owns its loop and its clients' cleanup; what one poll
does is the protocol's poll function (in its step's module under `_protocol.steps`), which poke
mode calls too (`poll(admin, store)` here is that one call). Blocking client calls run in
``asyncio.to_thread``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseEventTrigger, BaseTrigger, TriggerEvent

from airflow_samza_expand._kafka.admin import KafkaUnavailableError
from airflow_samza_expand._protocol import watch
from airflow_samza_expand._protocol.barrier.wait import (
    DEFAULT_PRODUCER_REFRESH_GRACE_S,
    BarrierWait,
    poll_barrier,
)
from airflow_samza_expand._protocol.ownership import lease_poll, take
from airflow_samza_expand._protocol.poll import Poll, Reconnect
from airflow_samza_expand._protocol.steps import ack, standby, stop
from airflow_samza_expand._protocol.steps.plan.wait import job_back_poll
from airflow_samza_expand.airflow._waitlog import WaitLog
from airflow_samza_expand.airflow.hooks import DEFAULT_COORDINATOR, SamzaExpandKafkaHook
from airflow_samza_expand.core.errors import ConflictError, ExpansionError

if TYPE_CHECKING:
    from airflow_samza_expand._kafka.admin import KafkaAdmin
    from airflow_samza_expand.store import CoordinatorStore

DEFAULT_CONN_ID = "kafka_default"
_MODULE = __name__


class PollingTrigger(BaseTrigger):
    """The loop every trigger here runs: open clients off the event loop, poll, log the
    progress line, sleep; reconnect after `Reconnect`'s failures; close in `cleanup`."""

    kafka_config_id: str
    request_timeout_s: float
    poll_interval_s: float
    job_name: str | None
    coordinator: str
    deadline: float | None = None  # class default; the barrier trigger has it as a field
    needs_store = True

    def __post_init__(self) -> None:
        super().__init__()  # BaseTrigger's own state; the dataclass __init__ set the fields

    def serialize(self) -> tuple[str, dict[str, Any]]:
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}
        return f"{_MODULE}.{type(self).__name__}", fields

    def poll(self, admin: KafkaAdmin, store: CoordinatorStore | None) -> Poll:
        """One poll. ``store`` is None only without a job (``job_name`` unset or
        ``needs_store`` False): the triggers whose ``job_name`` is required take a store."""
        raise NotImplementedError

    def event(self, poll: Poll) -> dict[str, Any]:
        return dict(poll.result or {})

    def timeout_event(self, poll: Poll | None) -> dict[str, Any]:
        return {"status": "timeout"}

    def rearm(self, poll: Poll) -> bool:
        """True to keep watching after an event (an event trigger)."""
        return False

    async def _open(self) -> tuple[KafkaAdmin, CoordinatorStore | None]:
        hook = SamzaExpandKafkaHook(kafka_config_id=self.kafka_config_id)
        self._config = await hook.aclient_config()
        self._hook = hook
        admin = await asyncio.to_thread(
            hook.get_admin, self._config, timeout_s=self.request_timeout_s
        )
        store = None
        if self.needs_store and self.job_name:
            store = await asyncio.to_thread(
                hook.get_coordinator_store, self.job_name, self.coordinator, self._config
            )
        self._clients = [c for c in (admin, store) if c is not None]
        return admin, store

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            admin, store = await self._open()
            reconnect = Reconnect()
            waits = WaitLog(self.log)  # one line per change of what it waits for
            while True:
                progress: Poll | None = None
                polled_at = time.time()  # time out only after a poll that began past the deadline
                deadline = reconnect.begin(polled_at, self.deadline)  # an outage doesn't count
                if deadline is not None:
                    self.deadline = deadline
                try:
                    progress = await asyncio.to_thread(self.poll, admin, store)
                    reconnect.ok()
                except KafkaUnavailableError as exc:
                    self.log.warning("Poll failed (will retry): %s", exc)
                    if reconnect.failed():
                        self.log.warning(
                            "%d failed polls in a row: reconnecting.", reconnect.failures
                        )
                        await self.cleanup()
                        admin, store = await self._open()
                if progress is not None and progress.done:
                    self.log.info("%s", progress.message)
                    yield TriggerEvent(self.event(progress))
                    if not self.rearm(progress):
                        return
                elif progress is not None:
                    waits.info(progress.message, key=progress.log_key)
                if (  # a poll that failed reached no verdict: no timeout on it
                    progress is not None
                    and self.deadline is not None
                    and polled_at >= self.deadline
                ):
                    yield TriggerEvent(self.timeout_event(progress))
                    return
                pause = self.poll_interval_s
                if progress is not None and progress.sleep_s is not None:
                    pause = max(min(pause, progress.sleep_s), 0.0)
                if progress is not None and self.deadline is not None:  # look once more
                    # right at the deadline (after a failed poll: the poll interval)
                    pause = min(pause, max(self.deadline - time.time(), 0.0))
                await asyncio.sleep(pause)
        except ExpansionError as exc:
            yield TriggerEvent({"status": "refused", "error": f"{type(exc).__name__}: {exc}"})
        except ConflictError as exc:  # another run took the expansion lease over
            yield TriggerEvent({"status": "lost", "error": f"{type(exc).__name__}: {exc}"})
        finally:
            await self.cleanup()

    async def cleanup(self) -> None:
        for client in getattr(self, "_clients", []):
            with contextlib.suppress(Exception):  # cleanup must not raise
                await asyncio.to_thread(client.close)
        self._clients = []


@dataclass(kw_only=True, eq=False)
class OrderingBarrierTrigger(PollingTrigger):
    """Waits out the producer refresh grace, snapshots the old partitions' high watermarks
    (stored in the expansion record, so a rerun reuses them) and waits until the job's consumer
    group has committed offsets ``>=`` the snapshot on every old partition; renews ``holder``'s
    expansion lease on every poll. Stale placements (docs/design.md): the snapshot also waits
    ``stale_quiet_s`` without a stale placement; stale placements still arriving at ``deadline``
    refuse the barrier.

    Fires ``{"status": "holds", "result": {...}}`` or, past ``deadline`` (epoch seconds),
    ``{"status": "timeout", ...}`` with the lag still left per partition.
    """

    job_name: str
    expansion_id: str
    consumer_group: str | None = None
    producer_refresh_grace_s: float = DEFAULT_PRODUCER_REFRESH_GRACE_S
    stale_quiet_s: float | None = None  # the stale placements' quiet window (None: the default)
    deadline: float | None = None  # `_protocol.barrier.wait.start_barrier`'s deadline
    snapshot_only: bool = False  # the wait ends at the snapshot
    poll_interval_s: float = 10.0
    holder: str | None = None
    coordinator: str = DEFAULT_COORDINATOR
    kafka_config_id: str = DEFAULT_CONN_ID
    request_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        super().__post_init__()
        self.consumer_group = self.consumer_group or self.job_name

    def wait(self) -> BarrierWait:
        """The barrier wait this trigger polls."""
        return BarrierWait(
            expansion_id=self.expansion_id,
            group=str(self.consumer_group),
            grace_s=float(self.producer_refresh_grace_s),
            stale_quiet_s=self.stale_quiet_s,
            holder=self.holder,
            snapshot_only=self.snapshot_only,
        )

    def poll(self, admin: KafkaAdmin, store: CoordinatorStore) -> Poll:
        return poll_barrier(admin, store, self.wait(), deadline=self.deadline)

    def event(self, poll: Poll) -> dict[str, Any]:
        return {"status": "holds", "result": poll.result}

    def timeout_event(self, poll: Poll | None) -> dict[str, Any]:
        detail = poll.detail if poll is not None else {}
        return {
            "status": "timeout",
            "expansion_id": self.expansion_id,
            "group": self.consumer_group,
            "total_lag": detail.get("total_lag"),
            "lag": detail.get("lag", "unknown"),
        }


@dataclass(kw_only=True, eq=False)
class JobModelAckTrigger(PollingTrigger):
    """Fires ``{"status": "acknowledged", ...}`` once ``min_processors`` processors heartbeat
    ``running`` job model ``version`` (``accept_stopped``: or a clean ``stopped``); logs who
    runs what on every poll; renews ``holder``'s expansion lease; the first poll starts
    ``expansion_id``'s ``ack`` step."""

    job_name: str
    version: int
    min_processors: int = 1
    accept_stopped: bool = False
    poll_interval_s: float = 5.0
    holder: str | None = None
    expansion_id: str | None = None
    coordinator: str = DEFAULT_COORDINATOR
    kafka_config_id: str = DEFAULT_CONN_ID
    request_timeout_s: float = 30.0

    def poll(self, admin: KafkaAdmin, store: CoordinatorStore) -> Poll:
        lease = take(store, self.holder) if self.holder else None  # renews the owner's lease
        return ack.ack_poll(
            store,
            int(self.version),
            int(self.min_processors),
            accept_stopped=self.accept_stopped,
            expansion_id=self.expansion_id,
            lease=lease,
        )

    def event(self, poll: Poll) -> dict[str, Any]:
        return {"status": "acknowledged", **(poll.result or {})}


@dataclass(kw_only=True, eq=False)
class ExpansionLeaseTrigger(PollingTrigger):
    """Fires ``{"status": "free", "holder"}`` once the job's expansion lease is released or
    expired (the run waiting for it, ``holder``, then decides again on the expansion of
    ``joined_holder``); logs who holds it and for which expansion."""

    job_name: str
    holder: str
    joined_holder: str
    poll_interval_s: float = 5.0
    coordinator: str = DEFAULT_COORDINATOR
    kafka_config_id: str = DEFAULT_CONN_ID
    request_timeout_s: float = 30.0

    def poll(self, admin: KafkaAdmin, store: CoordinatorStore) -> Poll:
        wait = lease_poll(store, self.holder)
        result = {"status": "free", "holder": self.joined_holder}
        return Poll(wait.free, f"{self.holder} waits: {wait.describe()}", result)


@dataclass(kw_only=True, eq=False)
class JobBackTrigger(PollingTrigger):
    """The plan's wait for a job that is down, when its DAG owns no launch: fires
    ``{"status": "running", "live", "version", "last_heartbeat"}`` once a live processor of the
    job's newest job model heartbeats, or past ``deadline`` (epoch seconds)
    ``{"status": "timeout", "version", "last_heartbeat"}``; logs the last heartbeat."""

    job_name: str
    deadline: float | None = None
    poll_interval_s: float = 10.0
    coordinator: str = DEFAULT_COORDINATOR
    kafka_config_id: str = DEFAULT_CONN_ID
    request_timeout_s: float = 30.0

    def poll(self, admin: KafkaAdmin, store: CoordinatorStore) -> Poll:
        return job_back_poll(store)

    def timeout_event(self, poll: Poll | None) -> dict[str, Any]:
        return {"status": "timeout", **dict(poll.detail if poll is not None else {})}


@dataclass(kw_only=True, eq=False)
class JobStopTrigger(PollingTrigger):
    """The deferred waits of ``StopStatefulJobOperator`` on job model ``version``: ``wait="stop"``
    fires ``{"status": "stopped", "stopped"}`` once none of its processors is live (the stop
    step's poll); ``wait="standby"`` fires ``{"status": "warm", "warm"}`` once a processor of it
    is warm (the warm handover's standby). Past ``deadline`` (epoch seconds):
    ``{"status": "timeout", "waiting"}``. Renews ``holder``'s expansion lease on every poll."""

    job_name: str
    version: int
    wait: str = "stop"
    deadline: float | None = None
    holder: str | None = None
    poll_interval_s: float = 5.0
    coordinator: str = DEFAULT_COORDINATOR
    kafka_config_id: str = DEFAULT_CONN_ID
    request_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.wait not in ("stop", "standby"):
            raise ValueError(f"wait must be 'stop' or 'standby', got {self.wait!r}")

    def poll(self, admin: KafkaAdmin, store: CoordinatorStore) -> Poll:
        if self.holder:
            take(store, self.holder)  # renews the owner's lease
        if self.wait == "standby":
            return standby.standby_poll(store, int(self.version))
        return stop.stop_poll(store, int(self.version))

    def event(self, poll: Poll) -> dict[str, Any]:
        return {"status": "warm" if self.wait == "standby" else "stopped", **(poll.result or {})}

    def timeout_event(self, poll: Poll | None) -> dict[str, Any]:
        return {"status": "timeout", "waiting": poll.message if poll is not None else ""}


@dataclass(kw_only=True, eq=False)
class PartitionCountChangeTrigger(PollingTrigger, BaseEventTrigger):
    """Fires ``{"topic", "baseline", "partition_count"}`` when the topic's partition count
    differs from ``baseline``. ``baseline`` None: with ``job_name``, the count the job's newest
    job model covers (read from its coordinator store at every poll, so it survives a restart
    of the triggerer: a topic grown while no triggerer ran still fires); without ``job_name``,
    the count at the first poll (a missing topic counts 0; held in memory only: a growth while
    the triggerer is down is missed - pass ``job_name``).

    A ``BaseEventTrigger``: usable in an ``AssetWatcher``, so a DAG runs when a topic grows
    outside Airflow. It keeps watching after firing, with the new count as baseline (with
    ``job_name``: it fires once per new count the job model does not cover yet; after a restart
    of the triggerer maybe once more - the run that starts then joins the expansion under way
    or ends skipped).
    """

    topic: str
    baseline: int | None = None
    poll_interval_s: float = 30.0
    kafka_config_id: str = DEFAULT_CONN_ID
    request_timeout_s: float = 30.0
    job_name: str | None = None
    coordinator: str = DEFAULT_COORDINATOR
    _watching: int | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._watching = self.baseline

    def poll(self, admin: KafkaAdmin, store: CoordinatorStore | None) -> Poll:
        if store is not None and self.baseline is None:  # the baseline is in the store
            return watch.job_model_count_poll(admin, store, self.topic, self._watching)
        progress = watch.partition_count_poll(admin, self.topic, self._watching)
        if self._watching is None:
            self._watching = progress.detail.get("baseline")
        return progress

    def rearm(self, poll: Poll) -> bool:
        self._watching = (poll.result or {}).get("partition_count")
        return True


def wait_in_worker(trigger: PollingTrigger) -> dict[str, Any]:
    """``trigger``'s own loop run to its first event in the calling thread (an operator that
    waits in the worker instead of deferring): the payload it would have fired deferred."""

    async def first() -> dict[str, Any]:
        events = trigger.run()
        try:
            event = await anext(events)
        finally:
            await events.aclose()
        return dict(event.payload)

    return asyncio.run(first())


__all__ = [
    "ExpansionLeaseTrigger",
    "JobBackTrigger",
    "JobModelAckTrigger",
    "JobStopTrigger",
    "OrderingBarrierTrigger",
    "PartitionCountChangeTrigger",
]
