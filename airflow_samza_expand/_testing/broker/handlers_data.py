"""Produce, Fetch, ListOffsets and InitProducerId handlers of the development broker (test/dev).

Batches stay bytes end to end: produce validates and appends them, fetch returns one slice of
the log per partition.
"""

from __future__ import annotations

import itertools
import logging
import time
from typing import TYPE_CHECKING, Any

from .codec import Request
from .storage import CorruptBatchError, has_keyless_record, split_batches

if TYPE_CHECKING:
    from .server import Broker

log = logging.getLogger(__name__)

_producer_ids = itertools.count(1000)
INVALID_RECORD = 87


def _compacted(broker: Broker, topic: str) -> bool:
    t = broker.state.topics.get(topic)
    return t is not None and "compact" in t.configs.get("cleanup.policy", "")


def _append(broker: Broker, topic: str, index: int, records: bytes) -> dict[str, Any]:
    """Validate and append one partition's batches; the fields of its produce response."""
    plog = broker.state.partition(topic, index)
    if plog is None:
        return {"error_code": 3}
    try:
        batches = split_batches(records)
    except CorruptBatchError as exc:
        log.warning("rejecting produce to %s[%d]: %s", topic, index, exc)
        return {"error_code": 2, "error_message": str(exc)}
    if _compacted(broker, topic) and has_keyless_record(records, batches):
        return {
            "error_code": INVALID_RECORD,
            "error_message": f"Compacted topic cannot accept message without key in topic "
            f"partition {topic}-{index}.",
        }
    duplicate = plog.duplicate_of(records, batches) if batches else None
    if duplicate is not None:
        log.info("%s[%d]: retried idempotent batch, not appended again (offset %d)",
                 topic, index, duplicate)  # fmt: skip
        base = duplicate
    else:
        base = plog.append(records, batches) if batches else plog.next_offset
    return {"error_code": 0, "base_offset": base, "log_start_offset": plog.log_start_offset}


async def produce(broker: Broker, req: Request) -> dict[str, Any] | None:
    body = req.body
    touched = set()
    responses = []
    for topic_data in body.topic_data:
        parts = []
        for pd in topic_data.partition_data:
            entry: dict[str, Any] = {
                "index": pd.index,
                "base_offset": -1,
                "log_append_time": None,
                "log_start_offset": -1,
                **_append(broker, topic_data.name, pd.index, pd.records or b""),
            }
            if entry["error_code"] == 0:
                touched.add((topic_data.name, pd.index))
            parts.append(entry)
        responses.append({"name": topic_data.name, "partition_responses": parts})
    if body.acks == -1:
        for topic, index in touched:
            broker.state.partition(topic, index).sync()
    if touched:
        broker.notify_data()
    if body.acks == 0:
        return None
    return {"responses": responses, "throttle_time": 0}


def produce_error(req: Request, code: int) -> dict[str, Any]:
    return {
        "responses": [
            {
                "name": t.name,
                "partition_responses": [
                    {
                        "index": p.index,
                        "error_code": code,
                        "base_offset": -1,
                        "log_start_offset": -1,
                        "log_append_time": None,
                    }
                    for p in t.partition_data
                ],
            }
            for t in req.body.topic_data
        ]
    }


def _fetch_once(broker: Broker, body: Any) -> tuple[list[dict[str, Any]], int]:
    remaining = body.max_bytes if getattr(body, "max_bytes", 0) > 0 else 0x7FFFFFFF
    total = 0
    responses = []
    for ft in body.topics:
        parts = []
        for fp in ft.partitions:
            plog = broker.state.partition(ft.topic, fp.partition)
            if plog is None:
                parts.append(
                    {
                        "partition_index": fp.partition,
                        "error_code": 3,
                        "high_watermark": -1,
                        "last_stable_offset": -1,
                        "log_start_offset": -1,
                        "records": b"",
                    }
                )
                continue
            entry = {
                "partition_index": fp.partition,
                "high_watermark": plog.next_offset,
                "last_stable_offset": plog.next_offset,
                "log_start_offset": plog.log_start_offset,
                "aborted_transactions": (),
                "preferred_read_replica": -1,
            }
            if not plog.log_start_offset <= fp.fetch_offset <= plog.next_offset:
                entry.update(error_code=1, records=b"")
            else:
                limit = min(fp.partition_max_bytes, remaining)
                data = plog.read(fp.fetch_offset, limit) if (limit > 0 or total == 0) else b""
                total += len(data)
                remaining = max(remaining - len(data), 0)
                entry.update(error_code=0, records=data)
            parts.append(entry)
        responses.append({"topic": ft.topic, "partitions": parts})
    return responses, total


async def fetch(broker: Broker, req: Request) -> dict[str, Any]:
    body = req.body
    max_wait = body.max_wait.total_seconds()
    deadline = time.monotonic() + max_wait
    while True:
        version = broker.data_version
        responses, total = _fetch_once(broker, body)
        wait = deadline - time.monotonic()
        errors = any(p["error_code"] for t in responses for p in t["partitions"])
        if total >= max(body.min_bytes, 1) or wait <= 0 or errors:
            break
        await broker.wait_for_data(version, wait)
    return {"throttle_time": 0, "error_code": 0, "session_id": 0, "responses": responses}


def fetch_error(req: Request, code: int) -> dict[str, Any]:
    return {
        "error_code": code,
        "session_id": 0,
        "responses": [
            {
                "topic": t.topic,
                "partitions": [
                    {
                        "partition_index": p.partition,
                        "error_code": code,
                        "high_watermark": -1,
                        "last_stable_offset": -1,
                        "log_start_offset": -1,
                        "records": b"",
                    }
                    for p in t.partitions
                ],
            }
            for t in req.body.topics
        ],
    }


LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3


async def list_offsets(broker: Broker, req: Request) -> dict[str, Any]:
    topics = []
    for t in req.body.topics:
        parts = []
        for p in t.partitions:
            plog = broker.state.partition(t.name, p.partition_index)
            entry: dict[str, Any] = {
                "partition_index": p.partition_index,
                "timestamp": -1,
                "offset": -1,
                "leader_epoch": 0,
            }
            if plog is None:
                entry["error_code"] = 3
            elif p.timestamp == LATEST:
                entry.update(error_code=0, offset=plog.next_offset)
            elif p.timestamp == EARLIEST:
                entry.update(error_code=0, offset=plog.log_start_offset)
            elif p.timestamp == MAX_TIMESTAMP:
                ts = max(plog.max_timestamps, default=-1)
                found = plog.offset_for_timestamp(ts) if ts >= 0 else None
                if found is not None:
                    entry.update(offset=found[0], timestamp=found[1])
                entry["error_code"] = 0
            elif p.timestamp < 0:
                entry["error_code"] = 42  # INVALID_REQUEST
            else:
                found = plog.offset_for_timestamp(p.timestamp)
                if found is not None:
                    entry.update(offset=found[0], timestamp=found[1])
                entry["error_code"] = 0
            parts.append(entry)
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


def list_offsets_error(req: Request, code: int) -> dict[str, Any]:
    return {
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": code,
                        "timestamp": -1,
                        "offset": -1,
                    }
                    for p in t.partitions
                ],
            }
            for t in req.body.topics
        ]
    }


async def init_producer_id(broker: Broker, req: Request) -> dict[str, Any]:
    if req.body.transactional_id is not None:
        # Transactions are not implemented; refuse clearly instead of pretending.
        return {"throttle_time": 0, "error_code": 35, "producer_id": -1, "producer_epoch": -1}
    return {
        "throttle_time": 0,
        "error_code": 0,
        "producer_id": next(_producer_ids),
        "producer_epoch": 0,
    }


def init_producer_id_error(req: Request, code: int) -> dict[str, Any]:
    return {"error_code": code, "producer_id": -1, "producer_epoch": -1}
