"""Every advertised API version is answered - normally and under an injected error - with a
decodable response that says what a client reads: the error code of every error field (none, or
the one the request provokes; the injected one under a fault) and the fields clients use
(partition indexes, offsets, the broker's address, member ids ...). Dev broker, raw kio requests.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from dev_broker_raw_client import call

from airflow_samza_expand._testing.broker.apis import APIS


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


REQUEST_TIMED_OUT = 7

# Error codes the requests above provoke on purpose (all other error fields must say 0).
PROVOKED = {
    "CreatePartitions": {37},  # INVALID_PARTITIONS: the topic already has 1 partition
    "DeleteGroups": {69},  # GROUP_ID_NOT_FOUND: "<group>-absent"
    "DeleteTopics": {3},  # UNKNOWN_TOPIC_OR_PARTITION: "<topic>-absent"
    "Heartbeat": {25},  # UNKNOWN_MEMBER_ID: member "nobody"
    "LeaveGroup": {25},
    "SyncGroup": {25},
}


def values(entity: Any, name: str) -> list[Any]:
    """Every value of a field called ``name`` anywhere in a decoded response."""
    found: list[Any] = []
    if dataclasses.is_dataclass(entity):
        for f in dataclasses.fields(entity):
            value = getattr(entity, f.name)
            if f.name == name:
                found.append(value)
            found += values(value, name)
    elif isinstance(entity, (tuple, list)):
        for item in entity:
            found += values(item, name)
    return found


def error_codes(entity: Any) -> list[int]:
    return [int(code) for code in values(entity, "error_code")]


def _check_api_versions(resp: Any, ctx: dict) -> None:
    advertised = {int(k.api_key): (k.min_version, k.max_version) for k in resp.api_keys}
    for spec in APIS.values():
        assert advertised[spec.key] == (spec.min_version, spec.max_version), spec.name


# What a client reads from each normal answer. ctx: topic, group, port.
READS: dict[str, Callable[[Any, dict], None]] = {
    "ApiVersions": _check_api_versions,
    "Produce": lambda r, c: (
        _eq(values(r, "name"), [c["topic"]]),
        _eq(values(r, "index"), [0]),
        _all(values(r, "base_offset"), lambda o: o >= 0),
    ),
    "Fetch": lambda r, c: (
        _eq(values(r, "topic") + values(r, "name"), [c["topic"]]),
        _eq(values(r, "partition_index"), [0]),
        _all(values(r, "high_watermark"), lambda o: o >= 0),
    ),
    "ListOffsets": lambda r, c: (
        _eq(values(r, "partition_index"), [0]),
        _all(values(r, "offset"), lambda o: o >= 0),
    ),
    "Metadata": lambda r, c: (
        _eq(values(r, "port"), [c["port"]]),
        _eq(values(r, "host"), ["127.0.0.1"]),
        _eq(values(r, "name"), [c["topic"]]),
        _eq(values(r, "partition_index"), [0]),
        _eq(values(r, "leader_id"), values(r, "node_id")),
    ),
    "OffsetCommit": lambda r, c: (
        _eq(values(r, "name"), [c["topic"]]),
        _eq(values(r, "partition_index"), [0]),
    ),
    "OffsetFetch": lambda r, c: (
        _eq(values(r, "partition_index"), [0]),
        _eq(values(r, "committed_offset"), [-1]),  # the group never committed
    ),
    "FindCoordinator": lambda r, c: (
        _eq(values(r, "port"), [c["port"]]),
        _eq(values(r, "host"), ["127.0.0.1"]),
    ),
    "JoinGroup": lambda r, c: (
        _all(values(r, "generation_id"), lambda g: g >= 1),
        _all(values(r, "member_id"), bool),
        _eq(values(r, "protocol_name"), ["range"]),
    ),
    "DescribeGroups": lambda r, c: _eq(values(r, "group_id"), [c["group"]]),
    "ListGroups": lambda r, c: _all(values(r, "protocol_type"), lambda t: t == "consumer"),
    "CreateTopics": lambda r, c: _eq(values(r, "name")[:1], [c["topic"] + "-new"]),
    "DeleteTopics": lambda r, c: _eq(values(r, "name"), [c["topic"] + "-absent"]),
    "InitProducerId": lambda r, c: (
        _all(values(r, "producer_id"), lambda p: p >= 0),
        _eq(values(r, "producer_epoch"), [0]),
    ),
    "DescribeConfigs": lambda r, c: (
        _eq(values(r, "resource_name"), [c["topic"]]),
        _all(["cleanup.policy"], lambda n: n in values(r, "name")),
    ),
    "AlterConfigs": lambda r, c: _eq(values(r, "resource_name"), [c["topic"]]),
    "IncrementalAlterConfigs": lambda r, c: _eq(values(r, "resource_name"), [c["topic"]]),
    "DeleteGroups": lambda r, c: _eq(values(r, "group_id"), [c["group"] + "-absent"]),
    "CreatePartitions": lambda r, c: _eq(values(r, "name"), [c["topic"]]),
}


def _eq(got: list, want: list) -> None:
    assert got == want


def _all(got: list, check: Callable[[Any], bool]) -> None:
    assert got and all(check(v) for v in got), got


# Known defect of the development broker (its code is the broker's own): OffsetFetch v1 has no
# top-level error field, and the injected error answer lists no partitions, so it carries no
# error at all - a client reads "nothing committed". The fix: the code in every requested
# partition (handlers_group.offset_fetch_error). Strict: this case fails once it is fixed.
KNOWN_BROKER_DEFECTS: dict[tuple[str, int], str] = {}  # (api, version) -> why it fails
PARAMS = [
    pytest.param(
        api,
        v,
        id=f"{api}-v{v}",
        marks=[pytest.mark.xfail(strict=True, reason=KNOWN_BROKER_DEFECTS[(api, v)])]
        if (api, v) in KNOWN_BROKER_DEFECTS
        else [],
    )
    for api, v in CASES
]


@pytest.mark.parametrize(("api", "version"), PARAMS)
def test_every_advertised_version_answers(dev_broker, topic, api: str, version: int) -> None:
    spec = next(s for s in APIS.values() if s.name == api)
    group = f"grp-{api}-{version}"
    body = _requests(topic, group)[api]
    resp = call(dev_broker.bootstrap, spec.key, version, body)
    codes = error_codes(resp)
    if api == "ApiVersions":
        assert codes == [0]
    else:
        assert codes, f"{api} v{version}: no error field decoded"
        assert {c for c in codes if c} == PROVOKED.get(api, set()), codes
    port = int(dev_broker.bootstrap.rsplit(":", 1)[1])
    READS.get(api, lambda r, c: None)(resp, {"topic": topic, "group": group, "port": port})
    if spec.error_response is not None:
        dev_broker.faults.inject(api=api, kind="error", error="REQUEST_TIMED_OUT")
        errored = call(dev_broker.bootstrap, spec.key, version, body)
        assert dev_broker.faults.hits(api) == 1
        injected = error_codes(errored)
        assert injected and set(injected) == {REQUEST_TIMED_OUT}, injected


def test_every_api_has_its_reads_checked() -> None:
    unchecked = {spec.name for spec in APIS.values()} - set(READS)
    assert unchecked == {"Heartbeat", "LeaveGroup", "SyncGroup"}  # their error code is the answer
