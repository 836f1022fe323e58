"""The ordering barrier end to end on Kafka: a producer with a short metadata refresh keeps
producing across the expansion; the sensor waits while the job's group is held back and
releases as soon as the committed offsets reach the snapshot."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import AirflowFailException, TaskDeferred
from airflow_env import first_event, task_context
from confluent_kafka import Producer
from kafka_helpers import commit_offsets, produce_keyed

from airflow_samza_expand._protocol import records
from airflow_samza_expand.airflow.operators import ExpandPartitionsOperator, PlanExpansionOperator
from airflow_samza_expand.airflow.sensors import OrderingBarrierSensor
from airflow_samza_expand.airflow.triggers import OrderingBarrierTrigger
from airflow_samza_expand.core._clock import parse_iso

pytestmark = pytest.mark.kafka


class KeyedProducer(threading.Thread):
    """Produces keyed records until stopped; refreshes topic metadata every 500 ms."""

    def __init__(self, config, topic: str) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.stop = threading.Event()
        self.delivered: Counter[int] = Counter()
        self.producer = Producer(
            {**config, "linger.ms": 5, "topic.metadata.refresh.interval.ms": 500}
        )

    def _on_delivery(self, err, msg) -> None:
        if err is None:
            self.delivered[msg.partition()] += 1

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            key = f"user-{i % 64}".encode()
            self.producer.produce(
                self.topic, key=key, value=str(i).encode(), on_delivery=self._on_delivery
            )
            self.producer.poll(0.01)
            i += 1
        self.producer.flush(30)

    def wait_for_partition(self, partition: int, timeout_s: float = 30.0) -> bool:
        deadline = threading.Event()
        for _ in range(int(timeout_s / 0.1)):
            if self.delivered[partition]:
                return True
            deadline.wait(0.1)
        return False


def plan_and_expand(j, target: int) -> str:
    plan = PlanExpansionOperator(
        task_id="plan", job_name=j.name, targets={j.topic: target}
    ).execute(task_context("plan"))
    ExpandPartitionsOperator(
        task_id="expand",
        topic=j.topic,
        target_partitions=target,
        job_name=j.name,
        expansion_id=plan["expansion_id"],
    ).execute(task_context("expand"))
    return plan["expansion_id"]


def stored_barrier(store, expansion_id: str) -> dict[int, int]:
    record = store.get_expansion(expansion_id)
    (offsets,) = record.barrier.values()
    return dict(offsets)


def poll_until(trigger, admin, store, done, what: str, timeout_s: float = 60.0):
    """One trigger poll at a time (the function poke mode calls) until `done(poll)`."""
    deadline = time.monotonic() + timeout_s
    while True:
        progress = trigger.poll(admin, store)
        if done(progress):
            return progress
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {progress.message}"
        time.sleep(0.2)


def test_barrier_waits_for_the_held_back_job_and_releases_at_the_snapshot(job, admin):
    j = job(2)
    producer = KeyedProducer(j.config, j.topic)
    producer.start()
    try:
        assert producer.wait_for_partition(0) and producer.wait_for_partition(1)
        expansion_id = plan_and_expand(j, 4)
        # The producer notices the new partitions after its metadata refresh and keeps going.
        assert producer.wait_for_partition(2) and producer.wait_for_partition(3)

        sensor = OrderingBarrierSensor(
            task_id="barrier",
            job_name=j.name,
            expansion_id=expansion_id,
            producer_refresh_grace_s=1.0,
            poke_interval=0.3,
            deferrable=True,
        )
        with pytest.raises(TaskDeferred) as deferred:  # the job has committed nothing yet
            sensor.execute(task_context("barrier"))
        trigger = deferred.value.trigger
        assert isinstance(trigger, OrderingBarrierTrigger)
        classpath, kwargs = trigger.serialize()
        assert kwargs["expansion_id"] == expansion_id and kwargs["deadline"] is not None

        # The job has committed nothing: the trigger waits out the grace, snapshots, waits.
        progress = poll_until(
            trigger,
            admin,
            j.store,
            lambda p: j.store.get_expansion(expansion_id).barrier,
            "the barrier snapshot",
        )
        assert not progress.done
        barrier = stored_barrier(j.store, expansion_id)
        assert sorted(barrier) == [0, 1] and all(o > 0 for o in barrier.values())
        record = j.store.get_expansion(expansion_id)
        grace_end = parse_iso(record.steps["expand"].ended_at).timestamp() + 1.0
        assert parse_iso(record.steps["barrier_snapshot"].ended_at).timestamp() >= grace_end

        # Held back one record short of the barrier on partition 0: still waiting.
        commit_offsets(j.config, j.name, j.topic, {0: barrier[0] - 1, 1: barrier[1]})
        still = trigger.poll(admin, j.store)
        assert not still.done and f"{j.topic}[0]=1" in still.message

        # Committed offsets reach the snapshot: released, although the producer has written
        # far past it meanwhile (the barrier is the snapshot, not the moving end).
        commit_offsets(j.config, j.name, j.topic, barrier)
        event = asyncio.run(first_event(trigger, 30))
    finally:
        producer.stop.set()
        producer.join()

    assert event.payload["status"] == "holds"
    result = sensor.execute_complete(task_context("barrier"), event.payload)
    assert result["barrier_offsets"] == {j.topic: {str(p): o for p, o in barrier.items()}}
    assert result["lag_drained"] == sum(barrier.values())
    passed = parse_iso(result["passed_at"]).timestamp()
    snapped = parse_iso(result["snapshot_at"]).timestamp()
    assert result["seconds_waited"] == round(passed - snapped, 3) > 0  # the job was held back
    ends = admin.high_watermarks({j.topic: [0, 1]})[j.topic]
    assert any(ends[p] > barrier[p] for p in barrier)

    # A rerun reuses the stored barrier (not the current end offsets) and holds at once.
    rerun = OrderingBarrierSensor(
        task_id="barrier", job_name=j.name, expansion_id=expansion_id, producer_refresh_grace_s=1.0
    ).execute(task_context("barrier"))
    assert rerun["barrier_offsets"] == result["barrier_offsets"]


def test_barrier_poke_mode_times_out_with_barrier_timeout_error(job):
    j = job(2)
    produce_keyed(j.config, j.topic, 50)
    expansion_id = plan_and_expand(j, 4)
    sensor = OrderingBarrierSensor(
        task_id="barrier",
        job_name=j.name,
        expansion_id=expansion_id,
        producer_refresh_grace_s=0,
        barrier_timeout_s=1.5,
        deferrable=False,
        poke_interval=0.3,
    )
    with pytest.raises(AirflowFailException, match="BarrierTimeoutError.*lag left") as refused:
        sensor.execute(task_context("barrier"))
    assert j.topic in str(refused.value)


def test_barrier_poke_mode_releases_when_the_job_catches_up(job):
    j = job(2)
    produce_keyed(j.config, j.topic, 50)
    expansion_id = plan_and_expand(j, 4)
    sensor = OrderingBarrierSensor(
        task_id="barrier",
        job_name=j.name,
        expansion_id=expansion_id,
        producer_refresh_grace_s=0,
        deferrable=False,
        poke_interval=0.3,
    )
    catch_up = threading.Timer(
        1.5,
        lambda: commit_offsets(j.config, j.name, j.topic, stored_barrier(j.store, expansion_id)),
    )
    catch_up.start()
    try:
        result = sensor.execute(task_context("barrier"))
    finally:
        catch_up.join()
    assert result["lag_drained"] == 50


def test_barrier_trigger_timeout_fails_the_sensor(job):
    j = job(2)
    produce_keyed(j.config, j.topic, 10)
    expansion_id = plan_and_expand(j, 4)
    trigger = OrderingBarrierTrigger(
        job_name=j.name,
        expansion_id=expansion_id,
        producer_refresh_grace_s=0,
        deadline=0.0,
        poll_interval_s=0.2,
    )
    event = asyncio.run(first_event(trigger, 30))
    assert event.payload["status"] == "timeout" and event.payload["total_lag"] == 10
    sensor = OrderingBarrierSensor(task_id="b", job_name=j.name, expansion_id=expansion_id)
    with pytest.raises(AirflowFailException, match="BarrierTimeoutError"):
        sensor.execute_complete(task_context(), event.payload)


def test_barrier_refuses_an_unknown_expansion(job):
    j = job(2)
    sensor = OrderingBarrierSensor(task_id="b", job_name=j.name, expansion_id="nope")
    with pytest.raises(AirflowFailException, match="run PlanExpansionOperator first"):
        sensor.execute(task_context())


def test_barrier_trigger_rides_out_offset_fetch_faults(job, dev_broker):
    j = job(2)
    produce_keyed(j.config, j.topic, 20)
    expansion_id = plan_and_expand(j, 4)
    trigger = OrderingBarrierTrigger(
        job_name=j.name,
        expansion_id=expansion_id,
        producer_refresh_grace_s=0,
        poll_interval_s=0.2,
        request_timeout_s=3,
    )
    sensor = OrderingBarrierSensor(
        task_id="b", job_name=j.name, expansion_id=expansion_id, producer_refresh_grace_s=0,
        deferrable=True,
    )  # fmt: skip
    with pytest.raises(TaskDeferred):
        sensor.execute(task_context())  # takes the snapshot
    commit_offsets(j.config, j.name, j.topic, stored_barrier(j.store, expansion_id))
    # A coordinator failover (retriable errors), then a flaky network (dropped connections).
    dev_broker.faults.inject("OffsetFetch", "error", error="COORDINATOR_NOT_AVAILABLE", times=3)
    dev_broker.faults.inject("OffsetFetch", "drop_connection", times=2)
    event = asyncio.run(first_event(trigger, 60))
    assert event.payload["status"] == "holds"
    assert dev_broker.faults.hits("OffsetFetch") == 5


def test_barrier_timeout_in_reschedule_mode_counts_from_the_first_reschedule(job):
    """Each reschedule is a new execute(); the timeout must not restart with it."""
    from datetime import UTC, datetime, timedelta
    from types import SimpleNamespace

    j = job(2)
    produce_keyed(j.config, j.topic, 10)
    expansion_id = plan_and_expand(j, 4)
    # Expanded 200 s ago, the sensor first ran 120 s ago, the barrier timeout is 60 s.
    long_ago = (datetime.now(UTC) - timedelta(seconds=200)).strftime("%Y-%m-%dT%H:%M:%SZ")
    records.update(j.store, expansion_id, lambda r: r.with_step("expand", ended_at=long_ago))
    first_try = datetime.now(UTC) - timedelta(seconds=120)
    ti = SimpleNamespace(
        dag_id="expansion_test",
        task_id="barrier",
        run_id="manual__test",
        try_number=1,
        get_first_reschedule_date=lambda _: first_try,
    )
    sensor = OrderingBarrierSensor(
        task_id="barrier",
        job_name=j.name,
        expansion_id=expansion_id,
        producer_refresh_grace_s=0,
        barrier_timeout_s=60,
        deferrable=False,
        mode="reschedule",
    )
    with pytest.raises(AirflowFailException, match="BarrierTimeoutError"):
        sensor.execute({"ti": ti})


def test_barrier_deadline_does_not_count_a_broker_outage(tmp_path, monkeypatch):
    """A broker of this test's own goes down right after the barrier's snapshot (the job 10
    records behind it); the deadline falls 1 s after the first poll that cannot reach it, and
    the broker comes back once a poll begun past the deadline found it unreachable. The job
    commits past the snapshot only after that (a driver fenced by the outage takes its lease
    again then). The barrier neither times out on a poll that could not reach Kafka nor at its
    first look after the outage: its deadline moved by the outage, and it holds once the group
    commits. The trigger's own polls stop and start the broker and set the deadline (a
    subclass), so each happens at an exact point of the wait, whatever the polls' durations."""
    import airflow_env

    from airflow_samza_expand._kafka.admin import KafkaAdmin, KafkaUnavailableError
    from airflow_samza_expand._kafka.config import client_config
    from airflow_samza_expand._testing import DevBrokerProcess
    from airflow_samza_expand.core.model import JobModel
    from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

    broker = DevBrokerProcess(data_dir=tmp_path / "data", log_path=tmp_path / "broker.log")
    broker.start()
    config = client_config(broker.bootstrap)
    store = KafkaCoordinatorStore(config, "job-outage")
    try:
        monkeypatch.setenv(
            "AIRFLOW_CONN_KAFKA_DEFAULT", airflow_env.kafka_connection_env(broker.bootstrap)
        )
        with KafkaAdmin(config, timeout_s=15) as admin:
            admin.ensure_topic("orders-outage", 2)
        store.write_job_model(JobModel.initial("job-outage", {"orders-outage": 2}))
        j = SimpleNamespace(name="job-outage", topic="orders-outage", store=store, config=config)
        produce_keyed(j.config, j.topic, 10)
        expansion_id = plan_and_expand(j, 4)
        deadline = [time.time() + 60.0]  # set 1 s into the outage by its first poll
        looks: list[str] = []

        class OutageTrigger(OrderingBarrierTrigger):
            def poll(self, admin, store):
                began = time.time()
                try:
                    progress = super().poll(admin, store)
                except KafkaUnavailableError:
                    looks.append("unreachable")
                    if looks == ["waits", "unreachable"]:
                        self.deadline = deadline[0] = began + 1.0
                    elif began >= deadline[0] and broker.proc is None:
                        broker.start()  # the same port and data
                        looks.append("back")
                    raise
                looks.append("holds" if progress.done else "waits")
                if looks == ["waits"]:  # the snapshot, the job behind it
                    broker.stop()
                elif "back" in looks and "committed" not in looks:  # its first look after
                    commit_offsets(j.config, j.name, j.topic, stored_barrier(store, expansion_id))
                    looks.append("committed")  # the job took its lease again and caught up
                return progress

        trigger = OutageTrigger(
            job_name=j.name, expansion_id=expansion_id, producer_refresh_grace_s=0,
            stale_quiet_s=0.0, deadline=deadline[0], poll_interval_s=0.2, request_timeout_s=2,
        )  # fmt: skip
        event = asyncio.run(first_event(trigger, 120)).payload
    finally:
        store.close()
        broker.close()
    assert event["status"] == "holds", (event, looks)
    assert looks[:2] == ["waits", "unreachable"] and looks[-2:] == ["committed", "holds"], looks
    assert event["result"]["lag_drained"] == 10
