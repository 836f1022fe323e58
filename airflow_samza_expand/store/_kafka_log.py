"""What the coordinator topic says: records applied in log order (no I/O; store._kafka reads).

Key: UTF-8 JSON object with sorted keys and compact separators::

    {"key":"<N>","type":"job-model","writer":"<w>"}                    a candidate for job model vN
    {"key":"<id>","revision":<r>,"type":"expansion","writer":"<w>"}     revision r of expansion <id>
    {"fence":["expansion",<e>],"key":"<id>","revision":<r>,...}         ... fenced by lease epoch e
    {"key":"<name>","revision":<r>,"type":"lease","writer":"<w>"}       revision r of lease <name>
    {"key":"stop","type":"control"}                                     the stop request
    {"key":"<id>","type":"processor"}                                   heartbeat of processor <id>
    {"key":"<id>","type":"expansion"}                                   legacy untyped expansion doc

Value: UTF-8 JSON; an empty value is a tombstone that deletes the key.

**The log order decides.** Plain keys: the last value wins (as compaction keeps it). Job
models: the candidate at the lowest offset is vN. Conditional records (expansion, lease): a
revision-r record is accepted only when the accepted revision of its id is r-1 (or none is
known: compaction may have removed it) and, when fenced, the lease it names is at that epoch
and not released, both as applied so far in log order. So for two writers of revision r the
lower offset wins, and every reader agrees. Writers carry a unique writer id in the key, so
compaction keeps every candidate until its writer (loser) or the next winner (older
revisions) writes a tombstone for it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import NamedTuple

from airflow_samza_expand.core.errors import CorruptCoordinatorRecordError
from airflow_samza_expand.store._kinds import EXPANSION, JOB_MODEL, LEASE

CONDITIONAL = frozenset({EXPANSION, LEASE})


def encode_key(
    record_type: str,
    key: str,
    writer: str | None = None,
    *,
    revision: int | None = None,
    fence: tuple[str, int] | None = None,
) -> bytes:
    """The record key bytes (module docstring)."""
    doc: dict[str, object] = {"type": record_type, "key": key}
    if writer is not None:
        doc["writer"] = writer
    if revision is not None:
        doc["revision"] = revision
    if fence is not None:
        doc["fence"] = list(fence)
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


class Key(NamedTuple):
    type: str
    key: str
    writer: str | None
    revision: int | None
    fence: tuple[str, int] | None


@dataclass(frozen=True)
class Entry:
    offset: int
    key: bytes
    value: bytes


@dataclass
class Chain:
    """The accepted revision of one conditional record and the candidate keys still alive."""

    current: Entry | None = None
    revision: int = 0
    live: dict[bytes, int] = field(default_factory=dict)  # candidate key -> its revision

    def obsolete(self) -> list[bytes]:
        """Candidate keys a winner may tombstone: older revisions and losers of this one."""
        mine = self.current.key if self.current else None
        return [k for k, r in self.live.items() if r <= self.revision and k != mine]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_key(raw: bytes | None) -> Key | None:
    """The parsed key, or None if it is not a coordinator key."""
    try:
        doc = json.loads(raw) if raw is not None else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("type"), str):
        return None
    kind, key, writer = doc["type"], doc.get("key"), doc.get("writer")
    revision, fence = doc.get("revision"), doc.get("fence")
    if not isinstance(key, str) or not isinstance(writer, str | None):
        return None
    if kind == JOB_MODEL and not (key.isdigit() and writer is not None):
        return None
    if revision is not None and not (_is_int(revision) and revision >= 1 and writer):
        return None
    if fence is not None:
        if not (
            isinstance(fence, list)
            and len(fence) == 2
            and isinstance(fence[0], str)
            and _is_int(fence[1])
        ):
            return None
        fence = (fence[0], fence[1])
    return Key(kind, key, writer, revision, fence)


class CoordinatorLog:
    """The state the records read so far establish (module docstring)."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.records: dict[tuple[str, str], Entry] = {}  # plain keys: newest entry
        self.candidates: dict[int, dict[str, Entry]] = {}  # job model version -> writer -> entry
        self.chains: dict[tuple[str, str], Chain] = {}
        self.corrupt_keys: dict[bytes | None, int] = {}  # unparseable key -> newest offset
        self._keys: dict[bytes, Key] = {}

    def _parse(self, raw: bytes | None) -> Key | None:
        parsed = self._keys.get(raw) if raw is not None else None
        if parsed is None:
            parsed = parse_key(raw)
            if parsed is not None and raw is not None:
                self._keys[raw] = parsed
        return parsed

    def apply(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        parsed = self._parse(key)
        if parsed is None or key is None:
            if value:
                self.corrupt_keys[key] = offset
            else:
                self.corrupt_keys.pop(key, None)
            return
        entry = Entry(offset, key, value or b"")
        if parsed.type == JOB_MODEL:
            version = int(parsed.key)
            candidates = self.candidates.setdefault(version, {})
            if value:
                candidates[parsed.writer or ""] = entry
            else:
                candidates.pop(parsed.writer or "", None)
                if not candidates:
                    del self.candidates[version]
        elif parsed.type in CONDITIONAL and parsed.revision is not None:
            self._apply_conditional(parsed, entry)
        elif value:
            self.records[(parsed.type, parsed.key)] = entry
        else:
            self.records.pop((parsed.type, parsed.key), None)

    def _apply_conditional(self, parsed: Key, entry: Entry) -> None:
        chain = self.chains.setdefault((parsed.type, parsed.key), Chain())
        revision = parsed.revision or 0
        if not entry.value:
            chain.live.pop(entry.key, None)
            if chain.current is not None and chain.current.key == entry.key:
                chain.current, chain.revision = None, 0
            return
        chain.live[entry.key] = revision
        follows = chain.current is None or revision == chain.revision + 1
        if follows and self._fence_holds(parsed.fence):
            chain.current, chain.revision = entry, revision

    def _fence_holds(self, fence: tuple[str, int] | None) -> bool:
        if fence is None:
            return True
        chain = self.chains.get((LEASE, fence[0]))
        if chain is None or chain.current is None:
            return True  # no lease known here (compaction removed it): nothing contradicts
        return lease_epoch(chain.current) == fence[1]

    def winner(self, version: int) -> tuple[str, Entry] | None:
        candidates = self.candidates.get(version)
        if not candidates:
            return None
        return min(candidates.items(), key=lambda item: item[1].offset)

    def chain(self, record_type: str, key: str) -> Chain | None:
        return self.chains.get((record_type, key))

    def raise_if_corrupt(self) -> None:
        """A record whose key is no coordinator key makes the store unreadable until someone
        writes a tombstone for that key (compaction then removes both)."""
        if not self.corrupt_keys:
            return
        key, offset = min(self.corrupt_keys.items(), key=lambda item: item[1])
        shown = repr(key[:80]) if key is not None else "None"
        raise CorruptCoordinatorRecordError(
            f"corrupt coordinator record in topic {self.topic!r} at offset {offset}: key "
            f"{shown} is not a coordinator key like "
            '{"key":"<id>","type":"<type>"} - write a tombstone (null value) for that key'
        )


def lease_epoch(entry: Entry) -> int | None:
    """The epoch of a lease record, or None when it is released or does not decode."""
    try:
        doc = json.loads(entry.value)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(doc, dict) or doc.get("released") or not _is_int(doc.get("epoch")):
        return None
    return int(doc["epoch"])


__all__ = [
    "Chain",
    "CoordinatorLog",
    "Entry",
    "Key",
    "encode_key",
    "lease_epoch",
    "parse_key",
]
