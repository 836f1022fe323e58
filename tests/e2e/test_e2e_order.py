"""The proof of order (docs/design.md 'Stale placements') through the expansion DAG under live
traffic: the real job (Spark local[2]), dag.test() on SQLite, live keyed producers refreshing
their metadata every second (grace 4 s). One job, two expansions:

* 2 -> 4 with one extra producer that keeps placing keys with the old count for 7 s after the
  growth (past the 4 s grace, far within the 600 s barrier timeout): the barrier waits until
  its stale placements stop for the quiet window (2 s, the factory's ``stale_quiet_s``),
  the stale placements before the snapshot are counted, and the report says
  ``order: proven`` (the restarted job reads none beyond the barrier);
* 4 -> 8 with ``on_stale_placement="fail"``: a record placed by hand into an old partition
  after the snapshot (when the report step starts) -> the report step fails naming the key
  (``order: at risk``), and the restarted job, given ``--barrier-offsets auto
  --on-stale-placement fail`` by the DAG, counts it into the record and stops (``failed``).

(Producers refreshing within the grace -> ``order: proven``: tests/e2e/test_e2e_expansion.py.)
"""

from __future__ import annotations

import threading
import time

import pytest

from airflow_samza_expand._demo.jobs import wait_for
from airflow_samza_expand._kafka.partitioners import crc32_partition
from airflow_samza_expand.core._clock import parse_iso

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.timeout(900)]

GRACE_S, QUIET_S, STALE_FOR_S = 4.0, 2.0, 7.0


class SlowRefresher(threading.Thread):
    """A producer that refreshes its metadata ``STALE_FOR_S`` after `grown` is called: until
    then it places keys ``slow-*`` with the old count (explicit ``crc32 % old``, the
    partitioner the plan detected), then with the new one (a new client: an explicit
    partition beyond the old client's metadata would be refused). Deterministic, unlike a
    real client's refresh timer."""

    def __init__(self, config: dict, topic: str, old: int, new: int) -> None:
        super().__init__(name="slow-refresher", daemon=True)
        self.config, self.topic, self.count, self.new = config, topic, old, new
        self.grown_at: float | None = None
        self.halt = threading.Event()
        self.producer = self._client()

    def _client(self):
        from confluent_kafka import Producer

        return Producer({**self.config, "linger.ms": 5})

    def grown(self) -> None:
        self.grown_at = time.time()

    def run(self) -> None:
        i = 0
        while not self.halt.wait(0.02):
            grown = self.grown_at
            if grown is not None and self.count != self.new and time.time() - grown >= STALE_FOR_S:
                self.producer.flush(30)
                self.producer, self.count = self._client(), self.new
            key = f"slow-{i % 20:03d}".encode()
            i += 1
            self.producer.produce(
                self.topic, key=key, value=b"{}", partition=crc32_partition(key, self.count)
            )
            self.producer.poll(0)
        self.producer.flush(30)

    def stop(self) -> None:
        self.halt.set()
        self.join(30)


def _moved_key(old: int, new: int) -> tuple[str, int]:
    for i in range(1000):
        key = f"late-{i}".encode()
        if crc32_partition(key, new) != crc32_partition(key, old):
            return key.decode(), crc32_partition(key, old)
    raise AssertionError("no moved key")


def _xcom(dag_id: str, task_id: str, key: str):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = (
            session.query(XComModel)
            .filter_by(dag_id=dag_id, task_id=task_id, key=key)
            .order_by(XComModel.timestamp.desc())
            .first()
        )
        return None if row is None else XComModel.deserialize_value(row)


def test_slow_producer_is_held_by_the_barrier_and_a_late_record_fails_the_run(scenario) -> None:
    from confluent_kafka import Producer

    from airflow_samza_expand._protocol.records import expansion_id_for

    s = scenario(run_mode="continuous", grace_s=GRACE_S, stale_quiet_s=QUIET_S)
    s.start_producer()
    slow = SlowRefresher(s.config, s.topic, 2, 4)
    slow.start()
    try:
        s.start_job()
        # (b) 2 -> 4: the slow producer's refresh comes 7 s after the growth
        b = s.expand(on_task=lambda t, e: slow.grown() if (t, e) == ("expand", "success") else 0)
    finally:
        slow.stop()
    assert b.state == "success", b.tasks
    record = s.store.get_expansion(expansion_id_for(s.job_name, {s.topic: 2}, {s.topic: 4}))
    grace_ends = parse_iso(record.steps["expand"].ended_at).timestamp() + GRACE_S
    last_stale = parse_iso(record.stale_placements["last_stale_at"]).timestamp()
    snapshot_at = parse_iso(record.steps["barrier_snapshot"].ended_at).timestamp()
    assert last_stale > grace_ends, "the slow producer kept placing stale records past the grace"
    assert snapshot_at >= last_stale + QUIET_S, "the barrier waited out the quiet window"
    order = b.summary["order"]
    print(f"[e2e] 2->4: {order['line']}")
    assert order["order"] == "proven" and order["stale_after_snapshot"] == 0
    assert order["stale_before_snapshot"] > 0
    assert order["stale_before_snapshot"] == record.stale_placements["before_snapshot"]["records"]

    # (c) 4 -> 8 with "fail": a record placed by hand after the snapshot, as the report starts
    key, partition = _moved_key(4, 8)

    def late_record(task_id: str, event: str) -> None:
        if (task_id, event) == ("report", "start"):
            producer = Producer({**s.config, "linger.ms": 0})
            producer.produce(s.topic, key=key.encode(), value=b"{}", partition=partition)
            assert producer.flush(30) == 0

    s.cfg.on_stale_placement = "fail"
    c = s.expand(on_task=late_record)
    assert c.state == "failed", c.tasks
    assert c.tasks["report"] == "failed", c.tasks
    assert all(st == "success" for t, st in c.tasks.items() if t != "report"), c.tasks
    dag_id = f"samza_expand_{s.job_name.replace('-', '_')}_4_8"
    summary = _xcom(dag_id, "report", "summary")
    print(f"[e2e] 4->8: {summary['order']['line']}")
    assert summary["order"]["order"] == "at risk"
    assert summary["order"]["keys_at_risk"] == [{"key": key, "records": 1}]
    assert f"key {key!r} at {s.topic}[{partition}]" in summary["order"]["line"]

    # the DAG gave the restarted job its order check: it counts the record and stops (fail)
    expansion_id = expansion_id_for(s.job_name, {s.topic: 4}, {s.topic: 8})

    def counted() -> bool:
        r = s.store.get_expansion(expansion_id)
        return bool(r and (r.stale_placements.get("after_snapshot") or {}).get("records"))

    wait_for("the restarted job to count the late record", counted, timeout_s=120)
    after = s.store.get_expansion(expansion_id).stale_placements["after_snapshot"]
    assert after["keys"] == [[key, 1]]
    wait_for(
        "the restarted job to stop on the stale placement (--on-stale-placement fail)",
        lambda: any(p.get("state") == "failed" for p in s.store.processors().values()),
        timeout_s=120,
    )
