"""The proof of order (docs/design.md 'Stale placements') end to end at the protocol level (no
Airflow: the DAG wiring is the integrator's): live keyed traffic, a 2 -> 4 growth, the barrier's
`order_poll` loop, the restarted real job (Spark local[2]) with `job_order_args`, and the
report's order line from the record.

* a producer refreshing slower than the grace (3 s vs 1 s): the barrier waits past the grace
  while its stale placements arrive, snapshots after a quiet window, and the run is still
  proven, with the stale placements before the snapshot counted;
* a record placed by hand into an old partition after the snapshot: "order at risk" naming the
  key; with "fail" the job fails.
"""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest
from spark_helpers import planned_growth, produce_raw
from test_spark_job import Job

from airflow_samza_expand._demo.producer import KeyedProducer
from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.partitioners import crc32_partition
from airflow_samza_expand._protocol.barrier.evidence import (
    job_order_args,
    order_summary,
    record_scan_start,
)
from airflow_samza_expand._protocol.barrier.reads import snapshot_barrier
from airflow_samza_expand._protocol.barrier.step import order_poll
from airflow_samza_expand.core._plan import plan_expansion
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._files import FileCoordinatorStore

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]

GRACE_S, QUIET_S, STALE_FOR_S = 1.0, 2.0, 3.0


class SlowRefresher(threading.Thread):
    """A producer whose metadata refresh comes STALE_FOR_S after the growth: until then it
    places keys with the old count (explicit ``crc32 % 2``), then with the new one. (A real
    client's refresh timer fires at a random phase; this one is deterministic.)"""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(name="slow-refresher", daemon=True)
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.bootstrap, self.topic, self.count, self.grown_at = bootstrap, topic, 2, None
        self.halt = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Producer

        i = 0
        while not self.halt.wait(0.02):
            if (
                self.count == 2
                and self.grown_at is not None
                and time.time() - self.grown_at >= STALE_FOR_S
            ):
                # the refresh: a client that knows the 4 partitions (an explicit partition
                # beyond the old client's metadata would be refused as unknown)
                self.producer.flush(30)
                self.producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
                self.count = 4
            key = f"slow-{i % 20:03d}".encode()
            i += 1
            partition = crc32_partition(key, self.count)
            self.producer.produce(self.topic, key=key, value=b"{}", partition=partition)
            self.producer.poll(0)
        self.producer.flush(30)

    def stop(self) -> None:
        self.halt.set()
        self.join(30)


def _barrier_loop(admin, store, config, expansion_id, expanded_at):
    """Poll like the barrier sensor (every 0.25 s) until the decision is not 'wait'."""
    deadline = expanded_at + 90
    reasons = []
    while True:
        poll = order_poll(
            admin, store, config, expansion_id=expansion_id, expanded_at=expanded_at,
            grace_ends=expanded_at + GRACE_S, deadline=deadline, stale_quiet_s=QUIET_S,
        )  # fmt: skip
        reasons.append(poll.decision.reason)
        if poll.decision.action != "wait":
            return poll, reasons
        time.sleep(min(0.25, poll.decision.wait_s or 0.25))


def test_slow_producer_held_by_the_barrier_then_a_late_record_puts_order_at_risk(
    spark, kafka_bootstrap, unique_topic, tmp_path, capsys
) -> None:
    job = Job(spark, kafka_bootstrap, unique_topic, tmp_path)
    v1 = job.store.write_job_model(JobModel.initial(job.name, {job.topic: 2}))
    config = {"bootstrap.servers": kafka_bootstrap}
    fresh = KeyedProducer(config, job.topic, keys=20, rate=80, refresh_ms=200).start()
    slow = SlowRefresher(kafka_bootstrap, job.topic)
    slow.start()
    typed = FileCoordinatorStore(job.coordinator, job.name)
    expansion_id = f"{job.name}~in.2-4"
    typed.put_expansion(planned_growth(job.name, job.topic, expansion_id), expected_revision=0)
    try:
        assert job.run() == 0  # v1 reads what is there
        with KafkaAdmin(config, timeout_s=15) as admin:
            record_scan_start(admin, typed, expansion_id)
            admin.create_partitions(job.topic, 4)
            expanded_at = slow.grown_at = time.time()
            poll, reasons = _barrier_loop(admin, typed, config, expansion_id, expanded_at)
            assert poll.decision.action == "snapshot", reasons[-1]
            waited = time.time() - expanded_at
            held = poll.evidence.before_snapshot
            assert held.records > 0 and any(k.startswith("slow-") for k in held.keys)
            assert any("stale placements still arriving" in r for r in reasons)
            assert waited >= STALE_FOR_S + QUIET_S > GRACE_S + QUIET_S  # grace extended
            barrier = snapshot_barrier(admin, {job.topic: 2})
        record = typed.get_expansion(expansion_id)
        record = typed.put_expansion(
            dataclasses.replace(record, barrier=barrier), expected_revision=record.revision
        )
        fresh.stop()
        slow.stop()
        assert job.run() == 0  # v1 drains to (and past) the barrier
        job.store.write_job_model(plan_expansion(v1, {job.topic: 2}, {job.topic: 4}).new_job_model)
        assert job.run(*job_order_args(record)) == 0
        summary = order_summary(typed.get_expansion(expansion_id))
        assert summary["order"] == "proven", summary["line"]
        assert summary["line"] == (
            f"order: proven (0 stale placements after the snapshot; {held.records} before it, "
            "held by the barrier)"
        )

        late = next(
            k
            for k in (f"late-{i}" for i in range(1000))
            if crc32_partition(k.encode(), 2) != crc32_partition(k.encode(), 4)
        )
        produce_raw(kafka_bootstrap, job.topic, [(crc32_partition(late.encode(), 2), late, {})])
        capsys.readouterr()
        assert job.run(*job_order_args(record, "fail")) == 2
        assert repr(late) in capsys.readouterr().err
        summary = order_summary(typed.get_expansion(expansion_id))
        assert summary["order"] == "at risk"
        assert summary["line"].startswith("order: at risk - 1 records of 1 keys")
        assert summary["keys_at_risk"] == [{"key": late, "records": 1}]
    finally:
        fresh.stop()
        slow.stop()
        typed.close()
