"""The coordinator store and the barrier on a three-node cluster while partition leaders die.

A killed broker is fenced after its session timeout (6 s here) and its leaderships move to the
in-sync replicas; meanwhile clients that cached the old leader are answered with errors, or with
no offset at all. Writes must complete exactly once and offsets come from the new leader."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._protocol.barrier.reads import snapshot_barrier
from airflow_samza_expand._protocol.cli.init_job import init_job
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

TIMEOUT_S = 45.0


def model(job: str, version: int) -> JobModel:
    grouper = ("GroupByPartition", "AllSspToSingleTaskGrouper")[version % 2]
    first = JobModel.initial(job, {"orders": 4}, grouper=grouper, created_by="tests")
    return dataclasses.replace(first, version=version)


@pytest.fixture
def cluster(kafka_cluster: object) -> Iterator[object]:
    """The module's cluster; a node a test killed is started again and caught up after it."""
    yield kafka_cluster
    stopped = set(kafka_cluster.nodes) - set(kafka_cluster.running_ids())  # type: ignore[attr-defined]
    for node_id in sorted(stopped):
        kafka_cluster.start_node(node_id)  # type: ignore[attr-defined]
    if stopped:
        kafka_cluster.wait_in_sync()  # type: ignore[attr-defined]


def records_in(config: dict[str, str], topic: str) -> int:
    """Every record of partition 0 of `topic`, compaction not run yet (a fresh topic)."""
    return len(keys_in(config, topic))


def keys_in(config: dict[str, str], topic: str) -> list[bytes | None]:
    """The key of every record of partition 0 of `topic`, in order; None for a tombstone (a
    winning conditional write tombstones the revision it replaced)."""
    consumer = Consumer({**config, "group.id": "count", "enable.partition.eof": "true",
                         "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    keys: list[bytes | None] = []
    try:
        while True:
            message = consumer.poll(TIMEOUT_S)
            assert message is not None, f"no end of {topic} within {TIMEOUT_S} s"
            if message.error() is None:
                keys.append(message.key() if message.value() is not None else None)
            elif message.error().code() == KafkaError._PARTITION_EOF:
                return keys
    finally:
        consumer.close()


def fill_two_partitions(admin: KafkaAdmin, config: dict[str, str], topic: str) -> None:
    """`topic` with 2 partitions holding 50 acknowledged records each (offsets 0..49)."""
    admin.ensure_topic(topic, 2)
    producer = Producer({**config, "acks": "all", "enable.idempotence": "true"})
    for i in range(100):
        producer.produce(topic, key=str(i).encode(), value=b"v", partition=i % 2)
    assert producer.flush(TIMEOUT_S) == 0


def test_coordinator_writes_complete_once_when_its_leader_dies(cluster, unique_topic):
    """The coordinator topic's leader is killed; the next job model write and lease renewal
    (both conditional on the revision read) retry against the new leader and land once."""
    config = cluster.client_config
    job = unique_topic("job")
    with KafkaCoordinatorStore(config, job, timeout_s=TIMEOUT_S) as store:
        store.write_job_model(model(job, 1))
        after_v1 = records_in(config, store.topic)
        store.write_job_model(model(job, 2))
        per_write = records_in(config, store.topic) - after_v1
        lease = store.acquire_lease("expansion", "run-1", ttl_s=120)
        before = records_in(config, store.topic)
        leader = cluster.leader(store.topic)
        cluster.kill(leader)  # the store's clients still know it as the leader
        v3 = model(job, 3)
        assert store.write_job_model(v3) == v3
        renewed = store.renew_lease(lease)
        assert renewed.revision == lease.revision + 1
        assert cluster.leader(store.topic) != leader
    written = [key for key in keys_in(config, store.topic)[before:] if key is not None]
    assert len(written) == per_write + 1, written  # v3 once, the renewal once
    with KafkaCoordinatorStore(config, job, timeout_s=TIMEOUT_S) as reader:
        assert [m.version for m in reader.job_model_history()] == [1, 2, 3]
        assert reader.get_lease("expansion").revision == renewed.revision


def test_barrier_snapshot_reads_the_new_leaders_high_watermark(cluster, unique_topic, caplog):
    """The leader of an old partition is killed right before the snapshot: the snapshot is the
    real high watermark from the new leader, never an unknown (negative) offset."""
    config = cluster.client_config
    topic = unique_topic("orders")
    with KafkaAdmin(config, timeout_s=TIMEOUT_S) as admin:
        fill_two_partitions(admin, config, topic)
        assert snapshot_barrier(admin, {topic: 2}) == {topic: {0: 50, 1: 50}}
        cluster.kill(cluster.leader(topic, 0))  # the admin's metadata still names it
        with caplog.at_level(logging.INFO, logger="airflow_samza_expand._kafka.admin"):
            assert snapshot_barrier(admin, {topic: 2}) == {topic: {0: 50, 1: 50}}


def test_a_coordinator_topic_with_one_replica_on_a_cluster_is_warned(cluster, unique_topic):
    """The provider's topics take the cluster's replication; one created with replication 1
    (by hand, or an old setting) is named by init-job and the plan step with the fix."""
    config = cluster.client_config
    orders = unique_topic("orders")
    with KafkaAdmin(config, timeout_s=TIMEOUT_S) as admin:
        admin.ensure_topic(orders, 2)
        replicated = unique_topic("job")
        result = init_job(config, replicated, [orders], timeout_s=TIMEOUT_S)
        assert result.written and result.warning is None
        with KafkaCoordinatorStore(config, replicated, timeout_s=TIMEOUT_S) as store:
            assert store.backend.io.replication() == (3, 3)  # the cluster's default
        single = unique_topic("job")
        with KafkaCoordinatorStore(
            config, single, timeout_s=TIMEOUT_S, replication_factor=1
        ) as store:
            store.write_job_model(JobModel.initial(single, {orders: 2}, created_by="tests"))
        result = init_job(config, single, [orders], timeout_s=TIMEOUT_S)
    assert not result.written
    assert "replication factor 1 on a cluster of 3 brokers" in (result.warning or "")
    assert "kafka-reassign-partitions.sh" in result.describe()


def test_a_long_lived_consumer_reads_watermarks_across_a_leader_kill(cluster, unique_topic):
    """The job's driver (the provider's reader) keeps one consumer for its watermark reads;
    the leader of a partition it reads is killed: the next read answers the real watermarks
    from the new leader instead of failing the job (it used to: _TIMED_OUT after 30 s)."""
    import time

    from airflow_samza_expand._kafka.leader_offsets import consumer_watermarks

    config = cluster.client_config
    topic = unique_topic("orders")
    with KafkaAdmin(config, timeout_s=TIMEOUT_S) as admin:
        fill_two_partitions(admin, config, topic)
    consumer = Consumer({**config, "group.id": "driver", "enable.auto.commit": "false"})
    consumers = [consumer]
    try:
        tps = [TopicPartition(topic, p) for p in (0, 1)]
        assert [consumer.get_watermark_offsets(tp, timeout=10, cached=False) for tp in tps] == [
            (0, 50),
            (0, 50),
        ]
        cluster.kill(cluster.leader(topic, 0))
        deadline = time.monotonic() + TIMEOUT_S

        def consumer_of(renew: bool) -> Consumer:
            if renew:
                consumers.append(Consumer({**config, "group.id": "driver"}))
            return consumers[-1]

        marks = [consumer_watermarks(consumer_of, tp, deadline, RuntimeError) for tp in tps]
        assert marks == [(0, 50), (0, 50)]
    finally:
        for each in consumers:
            each.close()


def test_a_rolling_restart_in_a_thread_leaves_every_node_serving(cluster, unique_topic):
    """The cluster fault matrix restarts the nodes in a background thread while the job runs:
    each node it started must outlive that thread (it was tied to it, and all three stopped
    together when the rolling restart returned)."""
    import subprocess
    import threading

    topic = unique_topic("rolling")
    rolling = threading.Thread(target=cluster.restart, name="rolling-restart")
    rolling.start()
    rolling.join(300)
    assert not rolling.is_alive(), "the rolling restart did not end within 300 s"
    for node_id, node in cluster.nodes.items():
        with pytest.raises(subprocess.TimeoutExpired):
            node.proc.wait(timeout=2.0)  # still running after the thread that started it ended
        assert node_id in cluster.running_ids()
    with KafkaAdmin(cluster.client_config, timeout_s=TIMEOUT_S) as admin:
        admin.ensure_topic(topic, 1)
    producer = Producer({**cluster.client_config, "acks": "all"})
    producer.produce(topic, b"after the rolling restart")
    assert producer.flush(TIMEOUT_S) == 0


def test_end_offsets_wait_while_a_partition_has_no_leader(cluster, unique_topic):
    """A rolling restart leaves partitions leaderless for a moment: librdkafka then answers
    ListOffsets with "No leaders found" (_NOENT), which failed the barrier. Here a partition's
    only replica is stopped and started again: the read waits for it, then gives the offset."""
    import threading

    from confluent_kafka.admin import AdminClient, NewTopic

    config = cluster.client_config
    topic = unique_topic("leaderless")
    creator = AdminClient(config)  # kept: its futures fail once the client is collected
    creator.create_topics([NewTopic(topic, 1, replica_assignment=[[3]])])[topic].result(TIMEOUT_S)
    producer = Producer({**config, "acks": "all"})
    for i in range(50):
        producer.produce(topic, key=str(i).encode(), value=b"v", partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    with KafkaAdmin(config, timeout_s=TIMEOUT_S) as admin:
        assert admin.high_watermarks({topic: [0]}) == {topic: {0: 50}}
        cluster.stop_node(3)  # the partition's only replica: no leader until it is back
        back = threading.Thread(target=cluster.start_node, args=(3,), name="start-node-3")
        back.start()
        try:
            assert admin.high_watermarks({topic: [0]}) == {topic: {0: 50}}
        finally:
            back.join(300)
