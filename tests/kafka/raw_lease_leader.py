"""A lease group's leader driven request by request (tests only): it decides when a rebalance
completes and who gets the lease partition, which a client library never lets a test do.

Speaks the classic consumer group protocol ("cooperative-sticky", the lease group's assignor)
with the subscription and assignment encodings of Kafka's ConsumerProtocol v0; the requests are
those of the conformance suite's `RawMember` (tests/testing/conformance/kafka_conformance_raw.py).
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "testing" / "conformance"))
from kafka_conformance_raw import NONE, REBALANCE_IN_PROGRESS, RawMember, wait_for_code  # noqa: E402


def _string(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def subscription(topic: str) -> bytes:
    """ConsumerProtocolSubscription v0: one topic, no user data."""
    return struct.pack(">hi", 0, 1) + _string(topic) + struct.pack(">i", -1)


def assignment(topic: str, partitions: list[int]) -> bytes:
    """ConsumerProtocolAssignment v0: ``partitions`` of ``topic`` (none: an empty list)."""
    if not partitions:
        return struct.pack(">hii", 0, 0, -1)
    body = struct.pack(">hi", 0, 1) + _string(topic) + struct.pack(">i", len(partitions))
    return body + b"".join(struct.pack(">i", p) for p in partitions) + struct.pack(">i", -1)


class RawLeaseLeader:
    """A member that joins the lease group first (so it leads) and syncs when the test says:
    the conformance suite's `RawMember` offering the lease group's assignor."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.topic = topic
        self.member = RawMember(
            bootstrap, group, protocol="cooperative-sticky", metadata=subscription(topic)
        )

    def join(self) -> None:
        """JoinGroup; blocks until every member rejoined; this member must be the leader."""
        code = self.member.join()
        assert code == NONE, f"JoinGroup answered error {code}"
        assert self.member.leader == self.member.member_id, "the raw member must lead the group"

    def sync(self, lease_to: str | None) -> None:
        """SyncGroup as the leader: the lease partition to member ``lease_to`` (None: nobody)."""
        members = list(self.member.members)
        given = {m: assignment(self.topic, [0] if m == lease_to else []) for m in members}
        code = self.member.sync(members, given)
        assert code == NONE, f"SyncGroup answered error {code} (27: a member left or rejoined)"

    def other(self) -> str:
        """The one other member of the group."""
        (other,) = [m for m in self.member.members if m != self.member.member_id]
        return other

    def wait_for_rebalance(self) -> None:
        """Heartbeat until the broker answers that the group is rebalancing (a member joined)."""
        heartbeat = self.member.heartbeat
        wait_for_code("the group to start rebalancing", heartbeat, REBALANCE_IN_PROGRESS)
