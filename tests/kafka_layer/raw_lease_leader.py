"""A lease group's leader driven request by request (tests only): it decides when a rebalance
completes and who gets the lease partition, which a client library never lets a test do.

Speaks the classic consumer group protocol ("cooperative-sticky", the lease group's assignor)
with the subscription and assignment encodings of Kafka's ConsumerProtocol v0; the requests are
encoded with kio (tests/testing/dev_broker_raw_client.py), at versions both brokers serve.
"""

from __future__ import annotations

import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "testing"))
from dev_broker_raw_client import call  # noqa: E402

JOIN, SYNC, HEARTBEAT = 11, 14, 12
MEMBER_ID_REQUIRED = 79
REBALANCE_IN_PROGRESS = 27


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


@dataclass
class RawLeaseLeader:
    """A member that joins the lease group first (so it leads) and syncs when the test says."""

    bootstrap: str
    group: str
    topic: str
    member_id: str = ""
    generation: int = -1
    members: tuple[str, ...] = ()

    def join(self) -> None:
        """JoinGroup; blocks until every member rejoined; this member must be the leader."""
        while True:
            resp = call(self.bootstrap, JOIN, 5, {
                "group_id": self.group, "session_timeout": 30000, "rebalance_timeout": 30000,
                "member_id": self.member_id, "group_instance_id": None,
                "protocol_type": "consumer",
                "protocols": [{"name": "cooperative-sticky", "metadata": subscription(self.topic)}],
            })  # fmt: skip
            self.member_id = resp.member_id or self.member_id
            if resp.error_code != MEMBER_ID_REQUIRED:
                break
        assert resp.error_code == 0, f"JoinGroup answered error {resp.error_code}"
        assert resp.leader == self.member_id, "the raw member must lead the group"
        self.generation = resp.generation_id
        self.members = tuple(m.member_id for m in resp.members)

    def sync(self, lease_to: str | None) -> None:
        """SyncGroup as the leader: the lease partition to member ``lease_to`` (None: nobody)."""
        assignments = [
            {"member_id": m, "assignment": assignment(self.topic, [0] if m == lease_to else [])}
            for m in self.members
        ]
        resp = call(self.bootstrap, SYNC, 3, {
            "group_id": self.group, "generation_id": self.generation,
            "member_id": self.member_id, "group_instance_id": None,
            "assignments": assignments,
        })  # fmt: skip
        assert resp.error_code == 0, (
            f"SyncGroup answered error {resp.error_code} (27: a member left or rejoined meanwhile)"
        )

    def other(self) -> str:
        """The one other member of the group."""
        (other,) = [m for m in self.members if m != self.member_id]
        return other

    def wait_for_rebalance(self, timeout_s: float = 30.0) -> None:
        """Heartbeat until the broker answers that the group is rebalancing (a member joined)."""
        deadline = time.monotonic() + timeout_s
        while self.heartbeat() != REBALANCE_IN_PROGRESS:
            assert time.monotonic() < deadline, "the group never started rebalancing"
            time.sleep(0.1)

    def heartbeat(self) -> int:
        return call(self.bootstrap, HEARTBEAT, 3, {
            "group_id": self.group, "generation_id": self.generation,
            "member_id": self.member_id, "group_instance_id": None,
        }).error_code  # fmt: skip
