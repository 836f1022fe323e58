"""The issue-18 scenario with a real client: an idempotent producer whose Produce was applied and
then timed out retries the same batch; the development broker, like Kafka, answers the retry
with the original offset instead of appending the records twice."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def test_retried_idempotent_batch_is_not_appended_twice(dev_broker, unique_topic) -> None:
    topic = unique_topic("idem")
    admin = AdminClient({"bootstrap.servers": dev_broker.bootstrap})
    for fut in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        fut.result()
    producer = Producer({
        "bootstrap.servers": dev_broker.bootstrap, "enable.idempotence": True,
        "linger.ms": 50, "socket.timeout.ms": 3000, "message.timeout.ms": 60000,
    })  # fmt: skip
    for i in range(10):
        producer.produce(topic, value=b"warm-up %d" % i)
    assert producer.flush(30) == 0
    dev_broker.faults.inject("Produce", "apply_then_timeout", times=1)
    delivered: list = []
    for i in range(5):
        producer.produce(topic, value=b"retried %d" % i,
                         on_delivery=lambda err, msg: delivered.append((err, msg)))  # fmt: skip
    assert producer.flush(60) == 0
    assert dev_broker.faults.hits("Produce") >= 1
    assert [err for err, _ in delivered] == [None] * 5
    assert sorted(msg.offset() for _, msg in delivered) == [10, 11, 12, 13, 14]
    consumer = Consumer({"bootstrap.servers": dev_broker.bootstrap, "group.id": "probe"})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()
    assert high == 15, f"log end offset {high} for 15 records: the retry was appended again"
