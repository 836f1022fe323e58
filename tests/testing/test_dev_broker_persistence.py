"""--data-dir keeps topics, logs and committed offsets across restarts and crashes (dev broker)."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from airflow_samza_expand._testing import DevBrokerProcess


def _consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[tuple]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple] = []
    deadline = time.monotonic() + 30
    while len(got) < expected and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        got.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
    consumer.close()
    return got


def test_topics_records_and_offsets_survive_restart(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with DevBrokerProcess(data_dir=data_dir) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        new = NewTopic("kept", 3, 1, config={"cleanup.policy": "compact"})
        for fut in admin.create_topics([new]).values():
            fut.result()
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
        for i in range(30):
            producer.produce("kept", key=b"k%d" % i, value=b"v%d" % i, partition=i % 3)
        assert producer.flush(20) == 0
        committer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "job"})
        committer.commit(offsets=[TopicPartition("kept", 1, 7)], asynchronous=False)
        committer.close()

        broker.restart()

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        assert len(admin.list_topics("kept", timeout=10).topics["kept"].partitions) == 3
        resource = ConfigResource(ConfigResource.Type.TOPIC, "kept")
        configs = admin.describe_configs([resource])[resource].result()
        assert configs["cleanup.policy"].value == "compact"
        records = _consume_all(broker.bootstrap, "kept", 3, 30)
        assert sorted(r[3] for r in records) == sorted(b"v%d" % i for i in range(30))
        assert {(r[0], r[1]) for r in records} == {(p, o) for p in range(3) for o in range(10)}
        reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "job"})
        committed = reader.committed([TopicPartition("kept", 1)], timeout=10)
        reader.close()
        assert committed[0].offset == 7

        # Appends after the restart continue the offsets.
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
        producer.produce("kept", key=b"after", value=b"after", partition=0)  # compacted: keyed
        assert producer.flush(20) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "w"})
        low, high = consumer.get_watermark_offsets(TopicPartition("kept", 0), timeout=10)
        consumer.close()
        assert (low, high) == (0, 11)


def test_acked_records_survive_a_killed_broker(tmp_path: Path) -> None:
    """acks=all is written (and fsynced) before the ack, so SIGKILL right after loses nothing."""
    data_dir = tmp_path / "data"
    with DevBrokerProcess(data_dir=data_dir) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for fut in admin.create_topics([NewTopic("crash", 1, 1)]).values():
            fut.result()
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0})
        acked: list[bytes] = []
        for i in range(50):
            producer.produce(
                "crash",
                value=b"r%d" % i,
                on_delivery=lambda err, msg: err is None and acked.append(msg.value()),
            )
            producer.flush(10)
        assert len(acked) == 50
        broker.kill()
        broker.start()
        records = _consume_all(broker.bootstrap, "crash", 1, 50)
        assert [r[3] for r in records] == acked


def test_memory_broker_forgets_on_restart() -> None:
    """Without --data-dir nothing is kept (the persistence test above would fail without it)."""
    with DevBrokerProcess() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for fut in admin.create_topics([NewTopic("gone", 1, 1)]).values():
            fut.result()
        broker.restart()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        assert "gone" not in admin.list_topics(timeout=10).topics


def test_deleted_topic_stays_deleted_after_restart(tmp_path: Path) -> None:
    with DevBrokerProcess(data_dir=tmp_path / "d") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for fut in admin.create_topics([NewTopic("short-lived", 2, 1)]).values():
            fut.result()
        for fut in admin.delete_topics(["short-lived"]).values():
            fut.result()
        broker.restart()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        assert "short-lived" not in admin.list_topics(timeout=10).topics


def test_altered_configs_and_deleted_groups_survive_restart(tmp_path: Path) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    with DevBrokerProcess(data_dir=tmp_path / "d") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for fut in admin.create_topics([NewTopic("cfg", 1, 1)]).values():
            fut.result()
        change = ConfigResource(
            ConfigResource.Type.TOPIC,
            "cfg",
            incremental_configs=[
                ConfigEntry("retention.ms", "1234", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        for fut in admin.incremental_alter_configs([change]).values():
            fut.result()
        for group in ("kept-group", "deleted-group"):
            consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
            consumer.commit(offsets=[TopicPartition("cfg", 0, 3)], asynchronous=False)
            consumer.close()
        for fut in admin.delete_consumer_groups(["deleted-group"]).values():
            fut.result()

        broker.restart()

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        plain = ConfigResource(ConfigResource.Type.TOPIC, "cfg")
        assert admin.describe_configs([plain])[plain].result()["retention.ms"].value == "1234"
        offsets = {}
        for group in ("kept-group", "deleted-group"):
            consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
            offsets[group] = consumer.committed([TopicPartition("cfg", 0)], timeout=10)[0].offset
            consumer.close()
        assert offsets == {"kept-group": 3, "deleted-group": -1001}
