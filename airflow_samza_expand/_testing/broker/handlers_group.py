"""FindCoordinator, offset and consumer-group handlers of the development broker (test/dev).

The single broker is the coordinator of every group. Commits with generation -1 (from
assign()-based consumers and AdminClient) are simple commits, accepted while the group has no
members (as Kafka; see GroupCoordinator.check_commit).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .codec import Request
from .handlers_admin import NODE_ID
from .state import CommittedOffset

if TYPE_CHECKING:
    from .server import Broker


async def find_coordinator(broker: Broker, req: Request) -> dict[str, Any]:
    body = req.body
    entry = {
        "node_id": NODE_ID,
        "host": broker.advertised_host,
        "port": broker.port,
        "error_code": 0,
        "error_message": None,
    }
    keys = getattr(body, "coordinator_keys", None)
    if keys is not None:
        return {"throttle_time": 0, "coordinators": [{"key": k, **entry} for k in keys]}
    return {"throttle_time": 0, **entry}


def find_coordinator_error(req: Request, code: int) -> dict[str, Any]:
    entry = {
        "node_id": -1,
        "host": "",
        "port": -1,
        "error_code": code,
        "error_message": "injected fault",
    }
    keys = getattr(req.body, "coordinator_keys", None)
    if keys is not None:
        return {"coordinators": [{"key": k, **entry} for k in keys]}
    return entry


async def offset_commit(broker: Broker, req: Request) -> dict[str, Any]:
    body = req.body
    code = broker.groups.check_commit(
        body.group_id, body.generation_id_or_member_epoch, body.member_id, req.api_version
    )
    items = []
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            err = code
            if err == 0 and broker.state.partition(t.name, p.partition_index) is None:
                err = 3
            if err == 0:
                epoch = getattr(p, "committed_leader_epoch", -1)
                items.append(
                    (
                        t.name,
                        p.partition_index,
                        CommittedOffset(p.committed_offset, epoch, p.committed_metadata),
                    )
                )
            parts.append({"partition_index": p.partition_index, "error_code": err})
        topics.append({"name": t.name, "partitions": parts})
    if items:
        broker.state.commit(body.group_id, items)
    return {"throttle_time": 0, "topics": topics}


def offset_commit_error(req: Request, code: int) -> dict[str, Any]:
    return {
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": p.partition_index, "error_code": code} for p in t.partitions
                ],
            }
            for t in req.body.topics
        ]
    }


def _group_offsets(broker: Broker, group_id: str, topics: Any) -> list[dict[str, Any]]:
    if topics is None:  # all committed partitions of the group
        by_topic: dict[str, list[int]] = {}
        for topic, part in sorted(broker.state.offsets.get(group_id, {})):
            by_topic.setdefault(topic, []).append(part)
        wanted = list(by_topic.items())
    else:
        wanted = [(t.name, list(t.partition_indexes)) for t in topics]
    out = []
    for name, parts in wanted:
        entries = []
        for part in parts:
            c = broker.state.committed(group_id, name, part)
            entries.append(
                {
                    "partition_index": part,
                    "error_code": 0,
                    "committed_offset": c.offset if c else -1,
                    "committed_leader_epoch": c.leader_epoch if c else -1,
                    "metadata": (c.metadata or "") if c else "",
                }
            )
        out.append({"name": name, "partitions": entries})
    return out


async def offset_fetch(broker: Broker, req: Request) -> dict[str, Any]:
    body = req.body
    groups = getattr(body, "groups", None)
    if groups is not None:
        return {
            "throttle_time": 0,
            "groups": [
                {
                    "group_id": g.group_id,
                    "error_code": 0,
                    "topics": _group_offsets(broker, g.group_id, g.topics),
                }
                for g in groups
            ],
        }
    return {
        "throttle_time": 0,
        "error_code": 0,
        "topics": _group_offsets(broker, body.group_id, body.topics),
    }


def offset_fetch_error(req: Request, code: int) -> dict[str, Any]:
    groups = getattr(req.body, "groups", None)
    if groups is not None:
        return {
            "groups": [{"group_id": g.group_id, "error_code": code, "topics": ()} for g in groups]
        }
    if req.api_version < 2:  # no group-level error before v2: each asked partition says it
        topics = [
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": p, "committed_offset": -1, "metadata": ""}
                    | {"error_code": code}
                    for p in t.partition_indexes
                ],
            }
            for t in req.body.topics or ()
        ]
        return {"error_code": code, "topics": topics}
    return {"error_code": code, "topics": ()}


async def join_group(broker: Broker, req: Request) -> dict[str, Any]:
    b = req.body
    session = b.session_timeout.total_seconds()
    rebalance = b.rebalance_timeout.total_seconds() if hasattr(b, "rebalance_timeout") else session
    result = await broker.groups.join(
        b.group_id,
        b.member_id,
        getattr(b, "group_instance_id", None),
        req.client_id or "",
        "/127.0.0.1",
        session,
        rebalance,
        b.protocol_type,
        [(p.name, p.metadata) for p in b.protocols],
    )
    return {"throttle_time": 0, **result}


def join_group_error(req: Request, code: int) -> dict[str, Any]:
    return {
        "error_code": code,
        "generation_id": -1,
        "leader": "",
        "member_id": req.body.member_id,
        "members": (),
    }


async def sync_group(broker: Broker, req: Request) -> dict[str, Any]:
    b = req.body
    assignments = {a.member_id: a.assignment for a in b.assignments}
    result = await broker.groups.sync(b.group_id, b.generation_id, b.member_id, assignments)
    return {"throttle_time": 0, "assignment": b"", **result}


def sync_group_error(req: Request, code: int) -> dict[str, Any]:
    return {"error_code": code, "assignment": b""}


async def heartbeat(broker: Broker, req: Request) -> dict[str, Any]:
    b = req.body
    return {
        "throttle_time": 0,
        "error_code": broker.groups.heartbeat(b.group_id, b.generation_id, b.member_id),
    }


def simple_error(req: Request, code: int) -> dict[str, Any]:
    return {"error_code": code}


async def leave_group(broker: Broker, req: Request) -> dict[str, Any]:
    b = req.body
    if hasattr(b, "members"):
        ids = [m.member_id for m in b.members]
        result = broker.groups.leave(b.group_id, ids)
        return {
            "throttle_time": 0,
            "error_code": 0,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "error_code": result[m.member_id],
                }
                for m in b.members
            ],
        }
    result = broker.groups.leave(b.group_id, [b.member_id])
    return {"throttle_time": 0, "error_code": result[b.member_id]}


async def list_groups(broker: Broker, req: Request) -> dict[str, Any]:
    names = set(broker.groups.groups) | set(broker.state.offsets)
    states_filter = set(getattr(req.body, "states_filter", None) or ())
    groups = []
    for name in sorted(names):
        d = broker.groups.describe(name, name in broker.state.offsets)
        if d["group_state"] == "Dead" or (states_filter and d["group_state"] not in states_filter):
            continue
        groups.append(
            {
                "group_id": name,
                "protocol_type": d["protocol_type"] or "consumer",
                "group_state": d["group_state"],
                "group_type": "classic",
            }
        )
    return {"throttle_time": 0, "error_code": 0, "groups": groups}


def list_groups_error(req: Request, code: int) -> dict[str, Any]:
    return {"error_code": code, "groups": ()}


async def describe_groups(broker: Broker, req: Request) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "groups": [broker.groups.describe(g, g in broker.state.offsets) for g in req.body.groups],
    }


def describe_groups_error(req: Request, code: int) -> dict[str, Any]:
    return {
        "groups": [
            {
                "error_code": code,
                "group_id": g,
                "group_state": "",
                "protocol_type": "",
                "protocol_data": "",
                "members": (),
            }
            for g in req.body.groups
        ]
    }


NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69


async def delete_groups(broker: Broker, req: Request) -> dict[str, Any]:
    results = []
    for group_id in req.body.groups_names:
        group = broker.groups.groups.get(group_id)
        if group is not None and group.members:
            code = NON_EMPTY_GROUP
        elif group is None and group_id not in broker.state.offsets:
            code = GROUP_ID_NOT_FOUND
        else:
            broker.groups.groups.pop(group_id, None)
            broker.state.delete_group_offsets(group_id)
            code = 0
        results.append({"group_id": group_id, "error_code": code})
    return {"throttle_time": 0, "results": results}


def delete_groups_error(req: Request, code: int) -> dict[str, Any]:
    return {"results": [{"group_id": g, "error_code": code} for g in req.body.groups_names]}
