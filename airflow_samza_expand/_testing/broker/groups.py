"""Classic consumer group protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) of the development
broker (test/dev tool only).

States follow Kafka's GroupCoordinator: Empty -> PreparingRebalance -> CompletingRebalance ->
Stable. A rebalance completes once every known member has rejoined, or at the largest
rebalance timeout, when members that did not rejoin are dropped. Members whose session expires
are removed and trigger a rebalance; a member awaiting its JoinGroup or SyncGroup answer is
alive, as in Kafka.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

NONE = 0
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
GROUP_ID_NOT_FOUND = 69

EMPTY = "Empty"
PREPARING = "PreparingRebalance"
COMPLETING = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_s: float
    rebalance_timeout_s: float
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    last_seen: float = field(default_factory=time.monotonic)
    join_future: asyncio.Future | None = None
    sync_future: asyncio.Future | None = None

    def metadata_for(self, protocol: str) -> bytes:
        return next((m for n, m in self.protocols if n == protocol), b"")


@dataclass
class Group:
    group_id: str
    state: str = EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    rebalance_timer: asyncio.TimerHandle | None = None
    initial_delay: bool = False  # an empty group waits this long for more members


class GroupError(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class GroupCoordinator:
    def __init__(self, initial_rebalance_delay_s: float = 0.0) -> None:
        self.groups: dict[str, Group] = {}
        self.initial_rebalance_delay_s = initial_rebalance_delay_s
        self._expiry_task: asyncio.Task | None = None

    def start(self) -> None:
        self._expiry_task = asyncio.get_running_loop().create_task(self._expire_loop())

    def stop(self) -> None:
        if self._expiry_task is not None:
            self._expiry_task.cancel()

    # ---- join ------------------------------------------------------------------------
    async def join(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_s: float,
        rebalance_timeout_s: float,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> dict[str, Any]:
        group = self.groups.setdefault(group_id, Group(group_id))
        if group.members and group.protocol_type not in (None, protocol_type):
            return _join_error(INCONSISTENT_GROUP_PROTOCOL, member_id)
        if member_id and member_id not in group.members:
            return _join_error(UNKNOWN_MEMBER_ID, member_id)
        if not member_id:
            member_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            member = Member(
                member_id,
                group_instance_id,
                client_id,
                client_host,
                session_timeout_s,
                rebalance_timeout_s,
                protocol_type,
                protocols,
            )
            group.members[member_id] = member
            log.info("group %s: member %s joins", group_id, member_id)
        else:
            member = group.members[member_id]
            # Kafka: a known member rejoining with the same metadata (it missed the answer)
            # gets the current generation; only the leader's rejoin, or new metadata,
            # rebalances a Stable group
            same = member.protocols == protocols
            if same and (
                group.state == COMPLETING or (group.state == STABLE and member_id != group.leader)
            ):
                member.last_seen = time.monotonic()
                return self._join_response(group, member)
            member.protocols = protocols
            member.session_timeout_s = session_timeout_s
            member.rebalance_timeout_s = rebalance_timeout_s
        group.protocol_type = protocol_type
        member.last_seen = time.monotonic()
        if member.join_future is not None and not member.join_future.done():
            member.join_future.set_result(_join_error(UNKNOWN_MEMBER_ID, member_id))
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        member.join_future = fut
        if group.state != PREPARING:
            self._prepare_rebalance(group, "member join")
        self._maybe_complete_join(group)
        return await fut

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        was_empty = group.state == EMPTY
        for m in group.members.values():
            if m.sync_future is not None and not m.sync_future.done():
                m.sync_future.set_result({"error_code": REBALANCE_IN_PROGRESS})
        group.state = PREPARING
        log.info("group %s: preparing rebalance (%s)", group.group_id, reason)
        timeout = max((m.rebalance_timeout_s for m in group.members.values()), default=0.0)
        if was_empty and self.initial_rebalance_delay_s > 0:
            timeout = self.initial_rebalance_delay_s
            group.initial_delay = True
        loop = asyncio.get_running_loop()
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
        group.rebalance_timer = loop.call_later(timeout, self._complete_join, group, True)

    def _maybe_complete_join(self, group: Group) -> None:
        if group.state != PREPARING:
            return
        if (
            group.rebalance_timer is not None
            and self.initial_rebalance_delay_s > 0
            and (group.generation == 0)
        ):
            return  # initial delay still running: wait for more members
        if all(
            m.join_future is not None and not m.join_future.done() for m in group.members.values()
        ):
            self._complete_join(group, False)

    def _complete_join(self, group: Group, timed_out: bool) -> None:
        if group.state != PREPARING:
            return
        group.initial_delay = False
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
            group.rebalance_timer = None
        for mid in [
            mid for mid, m in group.members.items() if m.join_future is None or m.join_future.done()
        ]:
            log.info("group %s: member %s did not rejoin in time; removed", group.group_id, mid)
            del group.members[mid]
        if not group.members:
            group.state = EMPTY
            group.leader = None
            group.protocol_name = None
            return
        group.generation += 1
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        leader = group.members[group.leader]
        common = [
            n
            for n, _ in leader.protocols
            if all(any(n == p for p, _ in m.protocols) for m in group.members.values())
        ]
        group.protocol_name = common[0] if common else leader.protocols[0][0]
        group.state = COMPLETING
        log.info(
            "group %s: generation %d with %d members, leader %s, protocol %s%s",
            group.group_id,
            group.generation,
            len(group.members),
            group.leader,
            group.protocol_name,
            " (timed out)" if timed_out else "",
        )
        for m in group.members.values():
            assert m.join_future is not None
            m.join_future.set_result(self._join_response(group, m))
            m.join_future = None
            m.last_seen = time.monotonic()

    @staticmethod
    def _join_response(group: Group, m: Member) -> dict[str, Any]:
        """The JoinGroup answer of the current generation to ``m`` (the leader gets the members)."""
        members = (
            [
                {
                    "member_id": o.member_id,
                    "group_instance_id": o.group_instance_id,
                    "metadata": o.metadata_for(group.protocol_name or ""),
                }
                for o in group.members.values()
            ]
            if m.member_id == group.leader
            else []
        )
        return {
            "error_code": NONE,
            "generation_id": group.generation,
            "protocol_type": group.protocol_type,
            "protocol_name": group.protocol_name,
            "leader": group.leader,
            "skip_assignment": False,
            "member_id": m.member_id,
            "members": members,
        }

    # ---- sync ------------------------------------------------------------------------
    async def sync(
        self, group_id: str, generation: int, member_id: str, assignments: dict[str, bytes]
    ) -> dict[str, Any]:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group else None
        if group is None or member is None:
            return {"error_code": UNKNOWN_MEMBER_ID}
        if generation != group.generation:
            return {"error_code": ILLEGAL_GENERATION}
        if group.state == PREPARING:
            return {"error_code": REBALANCE_IN_PROGRESS}
        member.last_seen = time.monotonic()
        ok = {
            "error_code": NONE,
            "protocol_type": group.protocol_type,
            "protocol_name": group.protocol_name,
        }
        if group.state == STABLE:
            return {**ok, "assignment": member.assignment}
        if member_id == group.leader:
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            group.state = STABLE
            log.info("group %s: stable at generation %d", group_id, group.generation)
            for m in group.members.values():
                if m.sync_future is not None and not m.sync_future.done():
                    m.sync_future.set_result({**ok, "assignment": m.assignment})
                m.sync_future = None
            return {**ok, "assignment": member.assignment}
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        member.sync_future = fut
        return await fut

    # ---- heartbeat / leave -----------------------------------------------------------
    def heartbeat(self, group_id: str, generation: int, member_id: str) -> int:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group else None
        if group is None or member is None:
            return UNKNOWN_MEMBER_ID
        member.last_seen = time.monotonic()
        if group.state == PREPARING:
            return REBALANCE_IN_PROGRESS
        if generation != group.generation:
            return ILLEGAL_GENERATION
        return NONE

    def leave(self, group_id: str, member_ids: list[str]) -> dict[str, int]:
        group = self.groups.get(group_id)
        result = {}
        for mid in member_ids:
            if group is None or mid not in group.members:
                result[mid] = UNKNOWN_MEMBER_ID
                continue
            self._remove(group, mid, "left the group")
            result[mid] = NONE
        return result

    def _remove(self, group: Group, member_id: str, why: str) -> None:
        member = group.members.pop(member_id)
        log.info("group %s: member %s %s", group.group_id, member_id, why)
        for fut in (member.join_future, member.sync_future):
            if fut is not None and not fut.done():
                fut.set_result(_join_error(UNKNOWN_MEMBER_ID, member_id))
        if group.state in (STABLE, COMPLETING):
            if group.members:
                self._prepare_rebalance(group, f"member {member_id} {why}")
            else:
                group.state = EMPTY
                group.leader = None
        elif group.state == PREPARING:
            if group.members:
                self._maybe_complete_join(group)
            else:
                self._complete_join(group, False)

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(0.25)
            now = time.monotonic()
            for group in list(self.groups.values()):
                for mid, m in list(group.members.items()):
                    # Kafka's ClassicGroupMember.hasSatisfiedHeartbeat: a member awaiting its
                    # JoinGroup or SyncGroup answer is alive (it cannot heartbeat meanwhile)
                    waiting = any(
                        f is not None and not f.done() for f in (m.join_future, m.sync_future)
                    )
                    if not waiting and now - m.last_seen > m.session_timeout_s:
                        self._remove(group, mid, "session expired")

    # ---- offset commit validation / describe -------------------------------------------
    def check_commit(
        self, group_id: str, generation: int, member_id: str, api_version: int = 0
    ) -> int:
        """Kafka's ClassicGroup.validateOffsetCommit: a simple commit (generation -1, no member
        id) only into an empty or unknown group; a member commit needs a known member of the
        current generation and is refused only while the group is CompletingRebalance (commits
        on revocation during PreparingRebalance are accepted)."""
        group = self.groups.get(group_id)
        if group is None:
            if generation < 0:
                return NONE
            return GROUP_ID_NOT_FOUND if api_version >= 9 else ILLEGAL_GENERATION
        if generation < 0 and group.state == EMPTY:
            return NONE
        if generation >= 0 or member_id:
            if member_id not in group.members:
                return UNKNOWN_MEMBER_ID
            if generation != group.generation:
                return ILLEGAL_GENERATION
        else:
            return UNKNOWN_MEMBER_ID  # simple commit into a group with members
        if group.state == COMPLETING:
            return REBALANCE_IN_PROGRESS
        return NONE

    def describe(self, group_id: str, known_offsets: bool) -> dict[str, Any]:
        group = self.groups.get(group_id)
        if group is None:
            state = EMPTY if known_offsets else DEAD
            return {
                "error_code": NONE,
                "group_id": group_id,
                "group_state": state,
                "protocol_type": "consumer" if known_offsets else "",
                "protocol_data": "",
                "members": (),
            }
        return {
            "error_code": NONE,
            "group_id": group_id,
            "group_state": group.state,
            "protocol_type": group.protocol_type or "",
            "protocol_data": group.protocol_name or "" if group.state == STABLE else "",
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_metadata": m.metadata_for(group.protocol_name or ""),
                    "member_assignment": m.assignment,
                }
                for m in group.members.values()
            ],
            "authorized_operations": -2147483648,
        }


def _join_error(code: int, member_id: str) -> dict[str, Any]:
    return {
        "error_code": code,
        "generation_id": -1,
        "protocol_name": None,
        "leader": "",
        "member_id": member_id,
        "members": (),
    }
