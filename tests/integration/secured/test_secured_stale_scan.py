"""The stale-placement scan (barrier and report steps) with exactly the `airflow` ACLs.

Its consumer only assign()s, so it holds no group ACL; librdkafka still looks up the
coordinator of the consumer's group.id (FindCoordinator) and reports the denial as a consumer
error at whichever poll it arrives. The scan must read on (as the coordinator store's reader
and the partitioner sampler do): on main it failed the report step whenever the denial came
while it was reading (a fresh-clone CI run's secured end-to-end DAG run failed so).
"""

from __future__ import annotations

import time

from confluent_kafka import Producer

from airflow_samza_expand._kafka.acls import resolve
from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._protocol.barrier.stale_scan import StaleScanner

MIN_CONSUMER_AGE_S = 3.0  # FindCoordinator answers within milliseconds on 127.0.0.1
MIN_ROUNDS = 5


def test_stale_scan_reads_on_without_a_group_acl(principal, admin_config, secured_topic) -> None:
    topic = secured_topic("orders", partitions=2)
    with KafkaAdmin(admin_config) as admin:
        start = {topic: {p: h for p, h in admin.high_watermarks({topic: range(2)})[topic].items()}}
        admin.create_partitions(topic, 4)
    airflow = principal(resolve("airflow", job="j", inputs=[topic]), name="airflow")
    producer = Producer(admin_config)
    positions, read, rounds, first_read = start, 0, 0, None
    with StaleScanner(airflow, {topic: (2, 4)}, "murmur2") as scanner:
        # poll while records keep arriving, until the consumer has surely heard the denial
        while rounds < MIN_ROUNDS or time.monotonic() - first_read < MIN_CONSUMER_AGE_S:
            for partition in (0, 1):
                producer.produce(
                    topic, key=f"k{rounds}-{partition}", value=b"v", partition=partition
                )
            producer.flush(10)
            result = scanner.poll(positions)
            first_read = first_read or time.monotonic()
            positions, read, rounds = result.positions, read + result.records_read, rounds + 1
    assert read == 2 * rounds  # every appended record was checked
    assert positions[topic] == {p: start[topic][p] + rounds for p in (0, 1)}
