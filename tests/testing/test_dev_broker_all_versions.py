"""Every advertised API version is answered with a decodable response - normally and under an
injected error - so no handler chokes on a version it advertises (dev broker, raw kio requests)."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from dev_broker_raw_client import call

from airflow_samza_expand.testing.broker.apis import APIS


def _requests(topic: str, group: str) -> dict[str, dict]:
    partition0 = {"partition_index": 0, "partition": 0, "index": 0}
    return {
        "Produce": {
            "acks": 1,
            "timeout": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": b""}]}],
        },
        "Fetch": {
            "replica_id": -1,
            "max_wait": 0,
            "min_bytes": 0,
            "max_bytes": 1 << 20,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {**partition0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                    ],
                }
            ],
        },
        "ListOffsets": {
            "replica_id": -1,
            "topics": [{"name": topic, "partitions": [{**partition0, "timestamp": -1}]}],
        },
        "Metadata": {"topics": [{"name": topic}]},
        "OffsetCommit": {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [{"name": topic, "partitions": [{**partition0, "committed_offset": 1}]}],
        },
        "OffsetFetch": {
            "group_id": group,
            "topics": [{"name": topic, "partition_indexes": [0]}],
            "groups": [{"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}],
        },
        "FindCoordinator": {"key": group, "coordinator_keys": [group]},
        "JoinGroup": {
            "group_id": group,
            "session_timeout": 6000,
            "rebalance_timeout": 6000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
        "Heartbeat": {"group_id": group, "generation_id": 1, "member_id": "nobody"},
        "LeaveGroup": {
            "group_id": group,
            "member_id": "nobody",
            "members": [{"member_id": "nobody"}],
        },
        "SyncGroup": {
            "group_id": group,
            "generation_id": 1,
            "member_id": "nobody",
            "assignments": [],
        },
        "DescribeGroups": {"groups": [group]},
        "ListGroups": {},
        "ApiVersions": {"client_software_name": "t", "client_software_version": "1"},
        "CreateTopics": {
            "topics": [{"name": topic + "-new", "num_partitions": 1, "replication_factor": 1}],
            "timeout": 5000,
            "validate_only": True,
        },
        "DeleteTopics": {"topic_names": [topic + "-absent"], "timeout": 5000},
        "InitProducerId": {
            "transactional_id": None,
            "transaction_timeout": 5000,
            "producer_id": -1,
            "producer_epoch": -1,
        },
        "DescribeConfigs": {
            "resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": None}]
        },
        "AlterConfigs": {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": topic,
                    "configs": [{"name": "retention.ms", "value": "100000"}],
                }
            ],
            "validate_only": True,
        },
        "IncrementalAlterConfigs": {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": topic,
                    "configs": [{"name": "retention.ms", "config_operation": 0, "value": "100000"}],
                }
            ],
            "validate_only": True,
        },
        "DeleteGroups": {"groups_names": [group + "-absent"]},
        "CreatePartitions": {
            "topics": [{"name": topic, "count": 1, "assignments": None}],
            "timeout": 5000,
            "validate_only": True,
        },
    }


CASES = [
    (spec.name, v) for spec in APIS.values() for v in range(spec.min_version, spec.max_version + 1)
]


@pytest.fixture(scope="module")
def topic(_dev_broker_process) -> str:
    if _dev_broker_process is None:
        pytest.skip("needs the development broker")
    name = "all-versions-topic"
    admin = AdminClient({"bootstrap.servers": _dev_broker_process.bootstrap})
    if name not in admin.list_topics(timeout=10).topics:
        for fut in admin.create_topics([NewTopic(name, 1, 1)]).values():
            fut.result()
    return name


@pytest.mark.parametrize(("api", "version"), CASES, ids=[f"{a}-v{v}" for a, v in CASES])
def test_every_advertised_version_answers(dev_broker, topic, api: str, version: int) -> None:
    spec = next(s for s in APIS.values() if s.name == api)
    body = _requests(topic, f"grp-{api}-{version}")[api]
    resp = call(dev_broker.bootstrap, spec.key, version, body)
    assert resp is not None
    if spec.error_response is not None:
        dev_broker.faults.inject(api=api, kind="error", error="REQUEST_TIMED_OUT")
        errored = call(dev_broker.bootstrap, spec.key, version, body)
        assert errored is not None
        assert dev_broker.faults.hits(api) == 1
