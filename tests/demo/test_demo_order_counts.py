"""The demo's order counts (``--stale-producer-refresh-ms``): stale placements before and after
the barrier snapshot of each expansion, from the expansion records and the topic itself."""

from __future__ import annotations

import time
from types import SimpleNamespace

from kafka_test_data import produce

from airflow_samza_expand._demo.stale import Producers, order_counts
from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand._kafka.partitioners import crc32_partition
from airflow_samza_expand._protocol.barrier.reads import barrier_to_dict, snapshot_barrier


def _iso(epoch_s: float) -> str:
    return (
        time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch_s))
        + f".{int(epoch_s % 1 * 1000):03d}Z"
    )


def _moved(n: int, prefix: str) -> list[bytes]:
    keys = (f"{prefix}-{i}".encode() for i in range(10_000))
    return [k for k in keys if crc32_partition(k, 2) != crc32_partition(k, 4)][:n]


def test_counts_before_and_after_the_snapshot(kafka_bootstrap, unique_topic):
    config = client_config(kafka_bootstrap)
    topic, job = unique_topic("orders"), unique_topic("job")
    with KafkaAdmin(config, timeout_s=15) as admin:
        admin.ensure_topic(topic, 2)
        # before the expansion: moved keys placed with 2 partitions are not stale
        produce(config, topic, [(k, b"{}", crc32_partition(k, 2)) for k in _moved(5, "early")])
        time.sleep(0.01)  # record timestamps are in ms: the expansion starts after them
        expanded_at = time.time()
        admin.create_partitions(topic, 4)
        held = _moved(3, "held")
        produce(config, topic, [(k, b"{}", crc32_partition(k, 2)) for k in held])
        barrier = snapshot_barrier(admin, {topic: 2})
        late = _moved(2, "late")
        produce(config, topic, [(k, b"{}", crc32_partition(k, 2)) for k in late + late[:1]])
    record = {  # the expansion record's fields the demo reads (legacy dict form)
        "barrier": barrier_to_dict(barrier),
        "counts_before": {topic: 2},
        "counts_after": {topic: 4},
        "expanded_at": _iso(expanded_at),
    }
    scenario = SimpleNamespace(topic=topic, job_name=job, config=config)
    order = order_counts(scenario, [record])
    assert order["stale_before_snapshot"] == 3
    assert order["stale_after_snapshot"] == 3
    assert {k["key"]: k["records"] for k in order["keys_at_risk"]} == {
        late[0].decode(): 2,
        late[1].decode(): 1,
    }
    assert order["line"].startswith("order: at risk - 3 records of 2 keys")
    assert order["expansions"][0]["partitions"] == {"before": 2, "after": 4}


def test_producers_look_like_one():
    class Fake:
        def __init__(self, counts):
            self.counts, self.stopped = counts, False

        total = property(lambda self: sum(self.counts.values()))

        def snapshot(self):
            return dict(self.counts)

        def stop(self):
            self.stopped = True

    a, b = Fake({"key-1": 3}), Fake({"stale-1": 2})
    both = Producers(a, b)
    assert both.snapshot() == {"key-1": 3, "stale-1": 2} and both.total == 5
    both.stop()
    assert a.stopped and b.stopped
