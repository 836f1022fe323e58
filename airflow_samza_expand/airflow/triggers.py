"""Async triggers of the expansion. Blocking client calls run in ``asyncio.to_thread``."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, BaseTrigger, TriggerEvent

from airflow_samza_expand.airflow.hooks import DEFAULT_COORDINATOR, SamzaExpandKafkaHook
from airflow_samza_expand.airflow.waits import (
    ack_poll,
    barrier_grace_until,
    barrier_poll,
    describe_lag,
    partition_count_or_zero,
)
from airflow_samza_expand.core.errors import ExpansionError
from airflow_samza_expand.kafka.admin import KafkaUnavailableError

DEFAULT_CONN_ID = "kafka_default"
RECONNECT_AFTER = 3
_MODULE = __name__


class _KafkaTriggerMixin:
    """Builds the admin client (and store) off the event loop; closes them in cleanup()."""

    kafka_config_id: str
    request_timeout_s: float

    async def _open(self, job_name: str | None = None, coordinator: str = DEFAULT_COORDINATOR):
        hook = SamzaExpandKafkaHook(kafka_config_id=self.kafka_config_id)
        config = await hook.aclient_config()
        admin = await asyncio.to_thread(hook.get_admin, config, timeout_s=self.request_timeout_s)
        store = None
        if job_name:
            store = await asyncio.to_thread(
                hook.get_coordinator_store, job_name, coordinator, config
            )
        self._clients = [c for c in (admin, store) if c is not None]
        self._hook, self._config = hook, config
        return admin, store

    async def _fresh_admin(self, admin: Any, failures: int) -> Any:
        """After RECONNECT_AFTER failed polls in a row, replace the admin client: a client
        whose connection broke may keep timing out, a new one reconnects."""
        if failures < RECONNECT_AFTER or failures % RECONNECT_AFTER:
            return admin
        self.log.warning("%d failed polls in a row: reconnecting the Kafka admin client.", failures)
        with contextlib.suppress(Exception):
            await asyncio.to_thread(admin.close)
        fresh = await asyncio.to_thread(
            self._hook.get_admin, self._config, timeout_s=self.request_timeout_s
        )
        self._clients = [fresh if c is admin else c for c in self._clients]
        return fresh

    async def cleanup(self) -> None:
        for client in getattr(self, "_clients", []):
            close = getattr(client, "close", None)
            if close is not None:
                with contextlib.suppress(Exception):  # cleanup must not raise
                    await asyncio.to_thread(close)
        self._clients = []


class OrderingBarrierTrigger(_KafkaTriggerMixin, BaseTrigger):
    """Waits out the producer refresh grace, snapshots the old partitions' high watermarks
    (stored in the expansion record, so a rerun reuses them) and waits until the job's consumer
    group has committed offsets ``>=`` the snapshot on every old partition.

    Fires ``{"status": "holds", "result": {...}}`` or, past ``deadline`` (epoch seconds),
    ``{"status": "timeout", ...}`` with the lag still left per partition.
    """

    def __init__(
        self,
        *,
        job_name: str,
        expansion_id: str,
        consumer_group: str | None = None,
        producer_refresh_grace_s: float = 300.0,
        deadline: float | None = None,
        poll_interval_s: float = 10.0,
        coordinator: str = DEFAULT_COORDINATOR,
        kafka_config_id: str = DEFAULT_CONN_ID,
        request_timeout_s: float = 30.0,
    ) -> None:
        super().__init__()
        self.job_name = job_name
        self.expansion_id = expansion_id
        self.consumer_group = consumer_group or job_name
        self.producer_refresh_grace_s = producer_refresh_grace_s
        self.deadline = deadline
        self.poll_interval_s = poll_interval_s
        self.coordinator = coordinator
        self.kafka_config_id = kafka_config_id
        self.request_timeout_s = request_timeout_s

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{_MODULE}.OrderingBarrierTrigger",
            {
                "job_name": self.job_name,
                "expansion_id": self.expansion_id,
                "consumer_group": self.consumer_group,
                "producer_refresh_grace_s": self.producer_refresh_grace_s,
                "deadline": self.deadline,
                "poll_interval_s": self.poll_interval_s,
                "coordinator": self.coordinator,
                "kafka_config_id": self.kafka_config_id,
                "request_timeout_s": self.request_timeout_s,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            admin, store = await self._open(self.job_name, self.coordinator)
            grace_until = await asyncio.to_thread(
                barrier_grace_until,
                store,
                self.expansion_id,
                self.job_name,
                self.producer_refresh_grace_s,
            )
            polls = failures = 0
            while True:
                try:
                    progress = await asyncio.to_thread(
                        barrier_poll,
                        admin,
                        store,
                        expansion_id=self.expansion_id,
                        job_name=self.job_name,
                        group=self.consumer_group,
                        grace_until=grace_until,
                    )
                    failures = 0
                except KafkaUnavailableError as exc:
                    failures += 1
                    self.log.warning("Barrier poll failed (will retry): %s", exc)
                    progress = None
                    admin = await self._fresh_admin(admin, failures)
                polls += 1
                if progress is not None and progress.phase == "holds":
                    self.log.info(
                        "Ordering barrier of %s holds after %d polls: %s",
                        self.expansion_id,
                        polls,
                        progress.result,
                    )
                    yield TriggerEvent({"status": "holds", "result": progress.result})
                    return
                if progress is not None and progress.phase == "grace":
                    self.log.info(
                        "Waiting for producers to refresh metadata after expansion %s: "
                        "%.0f s of grace left.",
                        self.expansion_id,
                        progress.grace_left_s,
                    )
                    await asyncio.sleep(min(self.poll_interval_s, progress.grace_left_s))
                    continue
                if progress is not None:
                    self.log.info(
                        "Waiting for group %s to commit past barrier %s: total lag %d (%s).",
                        self.consumer_group,
                        self.expansion_id,
                        progress.total_lag,
                        describe_lag(progress.lag),
                    )
                if self.deadline is not None and time.time() >= self.deadline:
                    yield TriggerEvent(
                        {
                            "status": "timeout",
                            "expansion_id": self.expansion_id,
                            "group": self.consumer_group,
                            "total_lag": progress.total_lag if progress else None,
                            "lag": describe_lag(progress.lag) if progress else "unknown",
                        }
                    )
                    return
                await asyncio.sleep(self.poll_interval_s)
        except ExpansionError as exc:
            yield TriggerEvent({"status": "refused", "error": f"{type(exc).__name__}: {exc}"})
        finally:
            await self.cleanup()


class JobModelAckTrigger(_KafkaTriggerMixin, BaseTrigger):
    """Fires ``{"status": "acknowledged", ...}`` once ``min_processors`` processors heartbeat
    ``running`` job model ``version``; logs who runs what on every poll."""

    def __init__(
        self,
        *,
        job_name: str,
        version: int,
        min_processors: int = 1,
        poll_interval_s: float = 5.0,
        coordinator: str = DEFAULT_COORDINATOR,
        kafka_config_id: str = DEFAULT_CONN_ID,
        request_timeout_s: float = 30.0,
    ) -> None:
        super().__init__()
        self.job_name = job_name
        self.version = version
        self.min_processors = min_processors
        self.poll_interval_s = poll_interval_s
        self.coordinator = coordinator
        self.kafka_config_id = kafka_config_id
        self.request_timeout_s = request_timeout_s

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{_MODULE}.JobModelAckTrigger",
            {
                "job_name": self.job_name,
                "version": self.version,
                "min_processors": self.min_processors,
                "poll_interval_s": self.poll_interval_s,
                "coordinator": self.coordinator,
                "kafka_config_id": self.kafka_config_id,
                "request_timeout_s": self.request_timeout_s,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            _, store = await self._open(self.job_name, self.coordinator)
            while True:
                try:
                    done, info = await asyncio.to_thread(
                        ack_poll, store, self.version, self.min_processors
                    )
                except KafkaUnavailableError as exc:
                    self.log.warning("Acknowledgement poll failed (will retry): %s", exc)
                    done, info = False, None
                if done:
                    yield TriggerEvent({"status": "acknowledged", **info})
                    return
                if info is not None:
                    self.log.info(
                        "Waiting for %d processor(s) of %s to run job model v%d: running %s, "
                        "others %s.",
                        self.min_processors,
                        self.job_name,
                        self.version,
                        info["running"] or "none",
                        info["others"] or "none",
                    )
                await asyncio.sleep(self.poll_interval_s)
        finally:
            await self.cleanup()


class PartitionCountChangeTrigger(_KafkaTriggerMixin, BaseEventTrigger):
    """Fires ``{"topic", "baseline", "partition_count"}`` when the topic's partition count
    differs from ``baseline`` (``None``: the count at the first poll; a missing topic counts 0).

    A ``BaseEventTrigger``: usable in an ``AssetWatcher``, so a DAG runs when a topic grows
    outside Airflow. It keeps watching after firing, with the new count as baseline.
    """

    def __init__(
        self,
        *,
        topic: str,
        baseline: int | None = None,
        poll_interval_s: float = 30.0,
        kafka_config_id: str = DEFAULT_CONN_ID,
        request_timeout_s: float = 30.0,
    ) -> None:
        super().__init__()
        self.topic = topic
        self.baseline = baseline
        self.poll_interval_s = poll_interval_s
        self.kafka_config_id = kafka_config_id
        self.request_timeout_s = request_timeout_s

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{_MODULE}.PartitionCountChangeTrigger",
            {
                "topic": self.topic,
                "baseline": self.baseline,
                "poll_interval_s": self.poll_interval_s,
                "kafka_config_id": self.kafka_config_id,
                "request_timeout_s": self.request_timeout_s,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            admin, _ = await self._open()
            baseline = self.baseline
            failures = 0
            while True:
                try:
                    count = await asyncio.to_thread(partition_count_or_zero, admin, self.topic)
                    failures = 0
                except KafkaUnavailableError as exc:
                    failures += 1
                    self.log.warning(
                        "Partition count poll of %s failed (will retry): %s", self.topic, exc
                    )
                    count = None
                    admin = await self._fresh_admin(admin, failures)
                if count is not None and baseline is None:
                    baseline = count
                    self.log.info("Watching %s: baseline %d partitions.", self.topic, baseline)
                elif count is not None and count != baseline:
                    self.log.info(
                        "Topic %s went from %d to %d partitions.", self.topic, baseline, count
                    )
                    yield TriggerEvent(
                        {"topic": self.topic, "baseline": baseline, "partition_count": count}
                    )
                    baseline = count
                else:
                    self.log.debug("Topic %s still has %s partitions.", self.topic, count)
                await asyncio.sleep(self.poll_interval_s)
        finally:
            await self.cleanup()
