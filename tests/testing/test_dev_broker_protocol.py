"""Protocol details librdkafka does not exercise by default, checked with raw kio requests:
batched FindCoordinator (v4), multi-group OffsetFetch (v8+), ApiVersions contents (dev broker)."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from dev_broker_raw_client import call

from airflow_samza_expand._testing.broker.apis import APIS


def test_api_versions_lists_exactly_the_implemented_apis(dev_broker) -> None:
    resp = call(
        dev_broker.bootstrap, 18, 3, {"client_software_name": "t", "client_software_version": "1"}
    )
    advertised = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert advertised == {s.key: (s.min_version, s.max_version) for s in APIS.values()}


def test_batched_find_coordinator_v4(dev_broker) -> None:
    resp = call(dev_broker.bootstrap, 10, 4, {"key_type": 0, "coordinator_keys": ["a", "b"]})
    assert [c.key for c in resp.coordinators] == ["a", "b"]
    port = int(dev_broker.bootstrap.rsplit(":", 1)[1])
    assert {(c.port, int(c.error_code)) for c in resp.coordinators} == {(port, 0)}


def test_multi_group_offset_fetch_v8(dev_broker, unique_topic) -> None:
    topic = unique_topic("ofs")
    admin = AdminClient({"bootstrap.servers": dev_broker.bootstrap})
    for fut in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        fut.result()
    g1, g2 = unique_topic("g1"), unique_topic("g2")
    for group, offset in ((g1, 5), (g2, 8)):
        consumer = Consumer({"bootstrap.servers": dev_broker.bootstrap, "group.id": group})
        consumer.commit(offsets=[TopicPartition(topic, 1, offset)], asynchronous=False)
        consumer.close()
    resp = call(
        dev_broker.bootstrap,
        9,
        8,
        {
            "groups": [
                {"group_id": g1, "topics": [{"name": topic, "partition_indexes": [0, 1]}]},
                {"group_id": g2, "topics": None},
            ],
            "require_stable": False,
        },
    )
    by_group = {
        g.group_id: {
            (t.name, p.partition_index): p.committed_offset for t in g.topics for p in t.partitions
        }
        for g in resp.groups
    }
    assert by_group == {g1: {(topic, 0): -1, (topic, 1): 5}, g2: {(topic, 1): 8}}
