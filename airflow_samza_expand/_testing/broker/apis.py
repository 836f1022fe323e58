"""The APIs the development broker implements (test/dev tool only): Kafka name, version range,
handler and, for fault injection, an error-response builder. ApiVersions advertises exactly this.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from . import handlers_admin as admin
from . import handlers_data as data
from . import handlers_group as grp

Handler = Callable[[Any, Any], Awaitable[dict[str, Any] | None]]
ErrorBuilder = Callable[[Any, int], dict[str, Any]]


@dataclass(frozen=True)
class ApiSpec:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler
    error_response: ErrorBuilder | None


_SPECS = [
    ApiSpec(0, "Produce", 3, 12, data.produce, data.produce_error),
    ApiSpec(1, "Fetch", 4, 12, data.fetch, data.fetch_error),
    ApiSpec(2, "ListOffsets", 1, 7, data.list_offsets, data.list_offsets_error),
    ApiSpec(3, "Metadata", 1, 12, admin.metadata, admin.metadata_error),
    ApiSpec(8, "OffsetCommit", 2, 9, grp.offset_commit, grp.offset_commit_error),
    ApiSpec(9, "OffsetFetch", 1, 9, grp.offset_fetch, grp.offset_fetch_error),
    ApiSpec(10, "FindCoordinator", 0, 4, grp.find_coordinator, grp.find_coordinator_error),
    ApiSpec(11, "JoinGroup", 0, 9, grp.join_group, grp.join_group_error),
    ApiSpec(12, "Heartbeat", 0, 4, grp.heartbeat, grp.simple_error),
    ApiSpec(13, "LeaveGroup", 0, 5, grp.leave_group, grp.simple_error),
    ApiSpec(14, "SyncGroup", 0, 5, grp.sync_group, grp.sync_group_error),
    ApiSpec(15, "DescribeGroups", 0, 5, grp.describe_groups, grp.describe_groups_error),
    ApiSpec(16, "ListGroups", 0, 5, grp.list_groups, grp.list_groups_error),
    ApiSpec(18, "ApiVersions", 0, 3, admin.api_versions, None),
    ApiSpec(19, "CreateTopics", 2, 7, admin.create_topics, admin.create_topics_error),
    ApiSpec(20, "DeleteTopics", 1, 5, admin.delete_topics, admin.delete_topics_error),
    ApiSpec(22, "InitProducerId", 0, 4, data.init_producer_id, data.init_producer_id_error),
    ApiSpec(32, "DescribeConfigs", 1, 4, admin.describe_configs, admin.describe_configs_error),
    ApiSpec(33, "AlterConfigs", 0, 2, admin.alter_configs, admin.alter_configs_error),
    ApiSpec(37, "CreatePartitions", 0, 3, admin.create_partitions, admin.create_partitions_error),
    ApiSpec(42, "DeleteGroups", 0, 2, grp.delete_groups, grp.delete_groups_error),
    ApiSpec(
        44,
        "IncrementalAlterConfigs",
        0,
        1,
        admin.incremental_alter_configs,
        admin.alter_configs_error,
    ),
]

APIS: dict[int, ApiSpec] = {s.key: s for s in _SPECS}
APIS_BY_NAME: dict[str, ApiSpec] = {s.name: s for s in _SPECS}
API_VERSIONS_KEY = 18


def advertised_versions() -> list[dict[str, int]]:
    return [
        {"api_key": s.key, "min_version": s.min_version, "max_version": s.max_version}
        for s in _SPECS
    ]
