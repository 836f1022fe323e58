"""The demo's and the fault matrices' keyed producer writes each record once when a produce
answer is lost (in the cluster matrix a leader died after appending a record and
before answering; the producer's retry appended it again - one extra count, a sequence
violation - and the check blamed the job)."""

from __future__ import annotations

import json

from confluent_kafka import Consumer, KafkaError, TopicPartition

from airflow_samza_expand._demo.producer import KeyedProducer
from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand._testing.launch import wait_until


def sequences(config: dict[str, str], topic: str) -> list[int]:
    consumer = Consumer({**config, "group.id": "probe", "enable.partition.eof": "true"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seqs: list[int] = []
    try:
        while True:
            message = consumer.poll(30)
            assert message is not None, f"no end of {topic} within 30 s"
            if message.error() is None:
                seqs.append(json.loads(message.value())["seq"])
            elif message.error().code() == KafkaError._PARTITION_EOF:
                return seqs
    finally:
        consumer.close()


def test_a_lost_produce_answer_does_not_write_a_record_twice(dev_broker, unique_topic):
    config = client_config(dev_broker.bootstrap)
    topic = unique_topic("orders")
    with KafkaAdmin(config, timeout_s=15) as admin:
        admin.ensure_topic(topic, 1)
    dev_broker.faults.inject("Produce", "apply_then_timeout", times=1)
    # a short socket timeout: the lost answer is retried within seconds, not 60
    producer = KeyedProducer(
        {**config, "socket.timeout.ms": "3000"}, topic, keys=1, rate=20.0, refresh_ms=500
    ).start()
    try:
        wait_until(
            "the lost answer and 40 acknowledged records",
            lambda: dev_broker.faults.hits("Produce") >= 1 and producer.total >= 40,
            timeout_s=60,
        )
    finally:
        producer.stop()
    seqs = sequences(config, topic)
    assert seqs == list(range(producer.total)), "a record was written twice (or lost)"
