"""Raw protocol steps for the conformance suite, where a client library cannot place a request
at an exact moment (a commit while the group is PreparingRebalance, a byte-identical retry of
an idempotent batch). Encoded with kio (tests/testing/dev_broker_raw_client.py); the versions
are ones Apache Kafka 4.x and the development broker both serve."""

from __future__ import annotations

import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from crc32c import crc32c

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from dev_broker_raw_client import call  # noqa: E402

NONE = 0
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79
RETRIABLE_COORDINATOR = {14, 15}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE

JOIN, SYNC, HEARTBEAT, LEAVE, COMMIT, FETCH_OFFSETS = 11, 14, 12, 13, 8, 9
PRODUCE, INIT_PRODUCER_ID, LIST_OFFSETS = 0, 22, 2


@dataclass
class RawMember:
    """One classic-protocol group member driven request by request."""

    bootstrap: str
    group: str
    member_id: str = ""
    generation: int = -1
    leader: str = ""
    protocol: str = "range"  # the assignor it offers, with its subscription metadata
    metadata: bytes = b""
    members: tuple[str, ...] = ()  # the generation's members, as the leader is told

    def join(self) -> int:
        """JoinGroup v5 (answers MEMBER_ID_REQUIRED once on Kafka); blocks until the rebalance
        completes; returns the error code."""
        while True:
            resp = call(self.bootstrap, JOIN, 5, {
                "group_id": self.group, "session_timeout": 30000, "rebalance_timeout": 30000,
                "member_id": self.member_id, "group_instance_id": None, "protocol_type": "consumer",
                "protocols": [{"name": self.protocol, "metadata": self.metadata}],
            })  # fmt: skip
            self.member_id = resp.member_id or self.member_id
            if resp.error_code != MEMBER_ID_REQUIRED:
                break
        if resp.error_code == NONE:
            self.generation, self.leader = resp.generation_id, resp.leader
            self.members = tuple(m.member_id for m in resp.members)
        return resp.error_code

    def sync(self, members: list[str], assignments_of: dict[str, bytes] | None = None) -> int:
        """SyncGroup; the leader gives each of ``members`` its assignment (empty by default)."""
        given = assignments_of or {}
        assignments = [{"member_id": m, "assignment": given.get(m, b"")} for m in members]
        resp = call(self.bootstrap, SYNC, 3, {
            "group_id": self.group, "generation_id": self.generation,
            "member_id": self.member_id, "group_instance_id": None,
            "assignments": assignments if self.leader == self.member_id else [],
        })  # fmt: skip
        return resp.error_code

    def heartbeat(self) -> int:
        return call(self.bootstrap, HEARTBEAT, 3, {
            "group_id": self.group, "generation_id": self.generation,
            "member_id": self.member_id, "group_instance_id": None,
        }).error_code  # fmt: skip

    def leave(self) -> int:
        return call(self.bootstrap, LEAVE, 3, {
            "group_id": self.group, "members": [{"member_id": self.member_id}],
        }).error_code  # fmt: skip


def commit(bootstrap: str, group: str, topic: str, offset: int, *,
           generation: int = -1, member_id: str = "") -> int:  # fmt: skip
    """OffsetCommit v7 of partition 0; returns its error code."""
    resp = call(bootstrap, COMMIT, 7, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id,
        "group_instance_id": None,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
             "committed_metadata": ""}]}],
    })  # fmt: skip
    return resp.topics[0].partitions[0].error_code


def committed(bootstrap: str, group: str, topic: str) -> int:
    resp = call(bootstrap, FETCH_OFFSETS, 5, {
        "group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}],
    })  # fmt: skip
    return resp.topics[0].partitions[0].committed_offset


def wait_for_code(what: str, request, code: int, timeout_s: float = 30) -> None:
    """Repeat `request()` until it answers `code` (the group reached a state)."""
    deadline = time.monotonic() + timeout_s
    while (got := request()) != code:
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: still error code {got}, wanted {code}")
        time.sleep(0.1)


# -- idempotent produce -------------------------------------------------------------------------


def _varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)  # zigzag
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def record_batch(values: list[bytes], producer_id: int, epoch: int, base_sequence: int) -> bytes:
    """One uncompressed v2 record batch of keyless records, as an idempotent producer sends it."""
    now = int(time.time() * 1000)
    records = b""
    for i, value in enumerate(values):
        body = b"\x00" + _varint(0) + _varint(i) + _varint(-1) + _varint(len(value)) + value
        body += _varint(0)  # no headers
        records += _varint(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", 0, len(values) - 1, now, now, producer_id, epoch,
                            base_sequence, len(values)) + records  # fmt: skip
    crc = crc32c(after_crc)
    tail = struct.pack(">ibI", 0, 2, crc) + after_crc  # partition leader epoch, magic, crc
    return struct.pack(">qi", 0, len(tail)) + tail


def init_producer_id(bootstrap: str, timeout_s: float = 30) -> tuple[int, int]:
    """InitProducerId v4; a fresh Kafka answers COORDINATOR_LOAD_IN_PROGRESS a while: retry."""
    deadline = time.monotonic() + timeout_s
    while True:
        resp = call(bootstrap, INIT_PRODUCER_ID, 4, {
            "transactional_id": None, "transaction_timeout": 60000,
            "producer_id": -1, "producer_epoch": -1,
        })  # fmt: skip
        if resp.error_code not in RETRIABLE_COORDINATOR or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert resp.error_code == NONE, resp
    return resp.producer_id, resp.producer_epoch


def produce(bootstrap: str, topic: str, batch: bytes) -> tuple[int, int]:
    """Produce v9, acks=all, to partition 0; returns (error code, base offset)."""
    resp = call(bootstrap, PRODUCE, 9, {
        "transactional_id": None, "acks": -1, "timeout": 10000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    })  # fmt: skip
    part = resp.responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def log_end_offset(bootstrap: str, topic: str) -> int:
    resp = call(bootstrap, LIST_OFFSETS, 5, {
        "replica_id": -1, "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}],
    })  # fmt: skip
    return resp.topics[0].partitions[0].offset
