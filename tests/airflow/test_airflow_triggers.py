"""Triggers: serialize() round trips, run() in an event loop against Kafka, the sensors that
defer to them, and the partition-count watcher."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from airflow.sdk.exceptions import TaskDeferred
from airflow.triggers.base import TriggerEvent
from airflow_env import first_event, task_context

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._protocol import watch
from airflow_samza_expand.airflow.sensors import JobModelAckSensor, PartitionCountSensor
from airflow_samza_expand.airflow.triggers import (
    JobModelAckTrigger,
    OrderingBarrierTrigger,
    PartitionCountChangeTrigger,
)
from airflow_samza_expand.core.model import JobModel

TRIGGERS = [
    OrderingBarrierTrigger(
        job_name="job",
        expansion_id="job~orders.2-4",
        consumer_group="grp",
        producer_refresh_grace_s=7.0,
        deadline=1.5e9,
        poll_interval_s=3.0,
        coordinator="/tmp/store",
        kafka_config_id="kafka_other",
        request_timeout_s=9.0,
    ),
    JobModelAckTrigger(job_name="job", version=3, min_processors=2, poll_interval_s=1.0),
    PartitionCountChangeTrigger(topic="orders", baseline=4, poll_interval_s=2.0),
    PartitionCountChangeTrigger(topic="orders"),
    PartitionCountChangeTrigger(topic="orders", job_name="job", coordinator="/tmp/store"),
]


@pytest.mark.parametrize("trigger", TRIGGERS, ids=lambda t: type(t).__name__)
def test_serialize_round_trips(trigger):
    from airflow.sdk._shared.module_loading import import_string

    classpath, kwargs = trigger.serialize()
    rebuilt = import_string(classpath)(**kwargs)
    assert type(rebuilt) is type(trigger)
    assert rebuilt.serialize() == (classpath, kwargs)
    assert vars(rebuilt).keys() >= kwargs.keys()


def test_partition_count_change_trigger_drives_an_asset_watcher():
    from airflow.sdk import DAG, Asset, AssetWatcher
    from airflow.serialization.serialized_objects import DagSerialization

    trigger = PartitionCountChangeTrigger(topic="orders", baseline=4, poll_interval_s=2.0)
    asset = Asset(
        name="orders_partitions",
        uri="kafka://cluster/orders",
        watchers=[AssetWatcher(name="orders_grew", trigger=trigger)],
    )
    with DAG("on_orders_growth", schedule=[asset]) as dag:
        pass
    serialized = DagSerialization.to_dict(dag)
    text = str(serialized)
    assert "PartitionCountChangeTrigger" in text and "'baseline': 4" in text.replace('"', "'")
    with pytest.raises((TypeError, ValueError)):  # a plain task trigger is refused
        AssetWatcher(name="not_event", trigger=TRIGGERS[1])


def later(delay_s: float, action) -> threading.Thread:
    def run() -> None:
        time.sleep(delay_s)
        action()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.kafka
def test_partition_count_change_trigger_fires_when_the_topic_grows(job, admin):
    j = job(2)
    trigger = PartitionCountChangeTrigger(topic=j.topic, baseline=2, poll_interval_s=0.2)
    grower = later(1.0, lambda: admin.create_partitions(j.topic, 4))
    event = asyncio.run(first_event(trigger, 30))
    grower.join()
    assert event.payload == {"topic": j.topic, "baseline": 2, "partition_count": 4}


@pytest.mark.kafka
def test_partition_count_change_trigger_of_a_job_fires_for_a_growth_it_did_not_see(job, admin):
    """With ``job_name`` the baseline is the count the job model covers (in the store), so a
    trigger started after the topic grew - a new triggerer after the old one died - fires;
    without it, the grown count would be its baseline. It fires once per count."""
    j = job(2)
    admin.create_partitions(j.topic, 4)  # grown before this trigger's first poll
    trigger = PartitionCountChangeTrigger(topic=j.topic, job_name=j.name, poll_interval_s=0.2)
    event = asyncio.run(first_event(trigger, 30))
    assert event.payload == {"topic": j.topic, "baseline": 2, "partition_count": 4}
    again = watch.job_model_count_poll(admin, j.store, j.topic, reported=4)  # after the rearm
    assert not again.done, again.message
    assert "job model v1" in again.message and "covers 2" in again.message, again.message


@pytest.mark.kafka
def test_partition_count_change_trigger_keeps_watching_after_firing(job, kconfig):
    j = job(2)
    trigger = PartitionCountChangeTrigger(topic=j.topic, poll_interval_s=0.2)

    async def two_events() -> list[dict]:
        agen = trigger.run()
        grow = KafkaAdmin(kconfig)
        try:
            first = asyncio.ensure_future(agen.__anext__())
            # Grow only once the first poll has taken the baseline (2): wait on that, not a clock.
            deadline = time.monotonic() + 60
            while trigger._watching is None:
                assert time.monotonic() < deadline, "the first poll never took a baseline"
                await asyncio.sleep(0.05)
            await asyncio.to_thread(grow.create_partitions, j.topic, 4)
            first_event = await asyncio.wait_for(first, 30)
            second = asyncio.ensure_future(agen.__anext__())  # re-arms with baseline 4 first
            await asyncio.to_thread(grow.create_partitions, j.topic, 8)
            second_event = await asyncio.wait_for(second, 30)
            return [first_event.payload, second_event.payload]
        finally:
            await agen.aclose()

    events = asyncio.run(two_events())
    assert [(e["baseline"], e["partition_count"]) for e in events] == [(2, 4), (4, 8)]


@pytest.mark.kafka
def test_partition_count_change_trigger_does_not_fire_without_change(job):
    j = job(2)
    trigger = PartitionCountChangeTrigger(topic=j.topic, baseline=2, poll_interval_s=0.2)
    with pytest.raises(TimeoutError):
        asyncio.run(first_event(trigger, 2))


@pytest.mark.kafka
def test_partition_count_sensor_defers_then_pokes(job, admin):
    j = job(2)
    sensor = PartitionCountSensor(
        task_id="watch", topic=j.topic, baseline=2, poke_interval=0.2, deferrable=True
    )
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute(task_context())
    trigger = deferred.value.trigger
    assert isinstance(trigger, PartitionCountChangeTrigger) and trigger.baseline == 2

    admin.create_partitions(j.topic, 4)
    event = asyncio.run(first_event(trigger, 30))
    assert sensor.execute_complete(task_context(), event.payload)["partition_count"] == 4

    poke = PartitionCountSensor(
        task_id="watch", topic=j.topic, baseline=2, deferrable=False, poke_interval=0.2
    )
    assert poke.execute(task_context()) == {"topic": j.topic, "baseline": 2, "partition_count": 4}


@pytest.mark.kafka
def test_job_model_ack_trigger_waits_for_running_heartbeats(job):
    j = job(2)
    j.store.write_job_model(
        JobModel.initial(j.name, {j.topic: 2}).__class__.from_dict(
            {**j.model.to_dict(), "version": 2}
        )
    )
    j.store.heartbeat("p-1", 1, "stopped")
    trigger = JobModelAckTrigger(job_name=j.name, version=2, min_processors=2, poll_interval_s=0.2)

    def the_job() -> None:
        j.store.heartbeat("p-1", 2, "starting")
        j.store.heartbeat("p-2", 2, "running")
        time.sleep(0.8)
        j.store.heartbeat("p-1", 2, "running")

    worker = later(0.5, the_job)
    event = asyncio.run(first_event(trigger, 30))
    worker.join()
    assert event.payload["status"] == "acknowledged"
    assert event.payload["running"] == ["p-1", "p-2"]


@pytest.mark.kafka
def test_job_model_ack_sensor_defaults_to_the_newest_version(job):
    j = job(2)
    j.store.heartbeat("p-1", 1, "starting")
    sensor = JobModelAckSensor(task_id="ack", job_name=j.name, poke_interval=0.2, deferrable=True)
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute(task_context())
    assert deferred.value.trigger.version == 1
    j.store.heartbeat("p-1", 1, "running")
    poke = JobModelAckSensor(task_id="ack", job_name=j.name, deferrable=False, poke_interval=0.2)
    assert poke.execute(task_context())["running"] == ["p-1"]


@pytest.mark.kafka
def test_triggers_never_block_the_event_loop(job, dev_broker, monkeypatch):
    """Every broker call of a trigger (opening clients, each poll) runs off the event loop's
    thread: a spy on the blocking functions records the thread each ran in (no clock involved;
    every broker answer is slowed by 0.5 s so a blocking call would stall the loop)."""
    from airflow_samza_expand._protocol import watch
    from airflow_samza_expand._protocol.steps import ack
    from airflow_samza_expand.airflow.hooks import SamzaExpandKafkaHook

    j = job(2)
    j.store.heartbeat("p-1", 1, "running")
    threads: list[tuple[str, int]] = []

    def spy(name, real):
        def call(*args, **kwargs):
            threads.append((name, threading.get_ident()))
            return real(*args, **kwargs)

        return call

    monkeypatch.setattr(
        watch, "partition_count_or_zero", spy("count", watch.partition_count_or_zero)
    )
    monkeypatch.setattr(ack, "ack_poll", spy("ack", ack.ack_poll))
    monkeypatch.setattr(
        SamzaExpandKafkaHook, "get_admin", spy("admin", SamzaExpandKafkaHook.get_admin)
    )
    monkeypatch.setattr(
        SamzaExpandKafkaHook,
        "get_coordinator_store",
        spy("store", SamzaExpandKafkaHook.get_coordinator_store),
    )
    dev_broker.faults.inject("Metadata", "delay", delay_s=0.5, times=None)
    dev_broker.faults.inject("Fetch", "delay", delay_s=0.5, times=None)

    async def run_both() -> tuple[int, list[TriggerEvent]]:
        count = PartitionCountChangeTrigger(topic=j.topic, baseline=1, poll_interval_s=0.1)
        ack = JobModelAckTrigger(job_name=j.name, version=1, poll_interval_s=0.1)
        events = await asyncio.gather(first_event(count, 60), first_event(ack, 60))
        return threading.get_ident(), list(events)

    try:
        loop_thread, events = asyncio.run(run_both())
    finally:
        dev_broker.faults.clear()
    assert events[0].payload["partition_count"] == 2
    assert events[1].payload["running"] == ["p-1"]
    assert {name for name, _ in threads} == {"count", "ack", "admin", "store"}
    assert [name for name, ident in threads if ident == loop_thread] == []


def test_a_trigger_times_out_only_after_a_poll_begun_past_its_deadline(monkeypatch):
    """A poll that began before the deadline answers for that moment; if the deadline passes
    while it runs, the trigger looks once more (the barrier may snapshot and hold right at the
    end of its grace) instead of timing out on the stale answer. The slow poll is a clock race
    a real broker cannot produce on demand, so the poll is replaced here."""
    from airflow_samza_expand._protocol.poll import Poll

    deadline = time.time() + 0.3
    polls: list[float] = []

    def poll(self, admin, store):
        polls.append(time.time())
        if len(polls) == 1:
            time.sleep(0.6)  # began before the deadline, answers after it
            return Poll(False, "waiting (as of the poll's start)", sleep_s=30.0)
        return Poll(True, "holds", result={"status": "holds"})

    async def no_clients(self):
        return None, None

    monkeypatch.setattr(OrderingBarrierTrigger, "poll", poll)
    monkeypatch.setattr(OrderingBarrierTrigger, "_open", no_clients)
    trigger = OrderingBarrierTrigger(
        job_name="job", expansion_id="job~orders.2-4", deadline=deadline, poll_interval_s=30.0
    )
    event = asyncio.run(first_event(trigger, 20))
    assert event.payload.get("status") != "timeout", event.payload
    assert len(polls) == 2 and polls[1] >= deadline


def test_a_trigger_logs_one_line_per_change_of_what_it_waits_for(monkeypatch):
    """The grace's countdown and the drain's lag change every poll: the log gets a line when
    what the barrier waits for changes (grace, then the drain of p0 and p1, then of p1 only),
    not one per poll. The poll is scripted (the figures of a real barrier vary with timing)."""
    from airflow_samza_expand._protocol.poll import Poll

    script = [
        Poll(False, "grace: 3 s left", sleep_s=0.0, waiting_for="grace"),
        Poll(False, "grace: 2 s left", sleep_s=0.0, waiting_for="grace"),
        Poll(False, "lag 40 (p0 20, p1 20)", sleep_s=0.0, waiting_for="drain of p0, p1"),
        Poll(False, "lag 12 (p0 2, p1 10)", sleep_s=0.0, waiting_for="drain of p0, p1"),
        Poll(False, "lag 5 (p1 5)", sleep_s=0.0, waiting_for="drain of p1"),
        Poll(False, "lag 1 (p1 1)", sleep_s=0.0, waiting_for="drain of p1"),
        Poll(True, "holds", result={"status": "holds"}),
    ]

    def poll(self, admin, store):
        return script.pop(0)

    async def no_clients(self):
        return None, None

    monkeypatch.setattr(OrderingBarrierTrigger, "poll", poll)
    monkeypatch.setattr(OrderingBarrierTrigger, "_open", no_clients)
    trigger = OrderingBarrierTrigger(
        job_name="job", expansion_id="job~orders.2-4", deadline=time.time() + 60,
        poll_interval_s=0.01,
    )  # fmt: skip
    logged: list[str] = []

    class Lines:  # the trigger's logger (Airflow's is structlog's, bound at the trigger)
        def info(self, fmt: str, *args: object) -> None:
            logged.append(fmt % args)

        warning = info

    monkeypatch.setattr(OrderingBarrierTrigger, "log", property(lambda self: Lines()))
    event = asyncio.run(first_event(trigger, 20))
    assert event.payload.get("status") != "timeout", event.payload
    assert logged == ["grace: 3 s left", "lag 40 (p0 20, p1 20)", "lag 5 (p1 5)", "holds"]
