"""Two subscribe() consumers share a topic through the classic group protocol (conformance)."""

from __future__ import annotations

import subprocess
import sys
import time

from confluent_kafka import Consumer, Producer
from kafka_conformance_helpers import produce_and_wait


def _member(bootstrap: str, group: str, topic: str, assigned: dict, name: str) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 500,
            "enable.auto.commit": False,
        }
    )

    def on_assign(c, partitions) -> None:
        assigned[name] = {p.partition for p in partitions}

    def on_revoke(c, partitions) -> None:
        assigned[name] = set()

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    return consumer


def _poll_until(consumers: dict, condition, timeout_s: float, seen: dict, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        for name, consumer in consumers.items():
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                seen.setdefault(name, []).append((msg.partition(), msg.offset()))


def test_two_members_split_partitions_and_take_over(
    kafka_bootstrap, create_topic, unique_topic
) -> None:
    topic = create_topic(4)
    group = unique_topic("grp")
    records = [(topic, None, b"%d" % i, i % 4) for i in range(40)]
    produce_and_wait(Producer({"bootstrap.servers": kafka_bootstrap}), records)

    assigned: dict[str, set[int]] = {}
    seen: dict[str, list] = {}
    a = _member(kafka_bootstrap, group, topic, assigned, "a")
    b = _member(kafka_bootstrap, group, topic, assigned, "b")
    consumers = {"a": a, "b": b}
    try:

        def split() -> bool:
            return (
                assigned.get("a")
                and assigned.get("b")
                and assigned["a"] | assigned["b"] == {0, 1, 2, 3}
                and not assigned["a"] & assigned["b"]
            )

        _poll_until(consumers, split, 60, seen, "both members to share the 4 partitions")
        assert len(assigned["a"]) == len(assigned["b"]) == 2

        def all_read() -> bool:
            return len({rec for recs in seen.values() for rec in recs}) == 40

        _poll_until(consumers, all_read, 60, seen, "the 40 records to be read")
        a.close()
        del consumers["a"]
        _poll_until(
            consumers,
            lambda: assigned.get("b") == {0, 1, 2, 3},
            60,
            seen,
            "the remaining member to take over every partition",
        )
    finally:
        for consumer in consumers.values():
            consumer.close()


CRASHING_MEMBER = """
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
              "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
c.subscribe([sys.argv[3]], on_assign=lambda c, ps: print("assigned", len(ps), flush=True))
while True:
    c.poll(0.2)
"""


def test_crashed_member_is_expired_and_its_partitions_reassigned(
    kafka_bootstrap, create_topic, unique_topic
) -> None:
    """A member that dies without leaving is removed after its session timeout."""
    topic = create_topic(2)
    group = unique_topic("crash")
    crasher = subprocess.Popen(
        [sys.executable, "-c", CRASHING_MEMBER, kafka_bootstrap, group, topic],
        stdout=subprocess.PIPE,
        text=True,
    )
    assigned: dict[str, set[int]] = {}
    survivor = None
    try:
        assert crasher.stdout is not None
        line = crasher.stdout.readline()  # blocks until the crasher owns the partitions
        assert line.startswith("assigned 2"), line
        survivor = _member(kafka_bootstrap, group, topic, assigned, "s")
        _poll_until(
            {"s": survivor},
            lambda: bool(assigned.get("s")),
            60,
            {},
            "the second member to get a share",
        )
        assert len(assigned["s"]) == 1
        crasher.kill()
        crasher.wait()
        _poll_until(
            {"s": survivor},
            lambda: assigned.get("s") == {0, 1},
            60,
            {},
            "the crashed member's session to expire",
        )
    finally:
        if crasher.poll() is None:
            crasher.kill()
            crasher.wait()
        if survivor is not None:
            survivor.close()
