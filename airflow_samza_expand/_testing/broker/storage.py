"""Partition logs of the development broker (test/dev tool only).

A log is the concatenation of v2 record batches exactly as producers sent them, with only the
base offset and partition leader epoch rewritten (neither is covered by the batch CRC). An
index of (base offset, byte position, max timestamp) per batch serves fetches as one
contiguous byte slice, so no per-record Python work happens on the produce or fetch path.
Bytes live in a bytearray, or in one append-only file per partition with --data-dir.

Idempotent producers: as Kafka, the log remembers the last 5 batches of each producer id
(epoch, first and last sequence, base offset); a batch that repeats one of them (a retry after
a lost response) is not appended again and answers with the original base offset.
"""

from __future__ import annotations

import logging
import os
import struct
from array import array
from bisect import bisect_right
from collections import deque
from pathlib import Path

from crc32c import crc32c
from kio.serial.readers import read_signed_varint, read_signed_varlong

log = logging.getLogger(__name__)

BATCH_HEADER_SIZE = 61  # up to and including the record count
_LEN = struct.Struct(">qi")  # base offset, batch length
_ATTR_LOD = struct.Struct(">hi")  # attributes, last offset delta (at byte 21)
_TS = struct.Struct(">qq")  # base timestamp, max timestamp (at byte 27)
_BASE_AND_EPOCH = struct.Struct(">qii")  # base offset, length, leader epoch
_PRODUCER = struct.Struct(">qhi")  # producer id, producer epoch, base sequence (at byte 43)
PRODUCER_BATCHES_KEPT = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN


class CorruptBatchError(ValueError):
    """Produced bytes are not a sequence of valid v2 record batches."""


def split_batches(records: bytes) -> list[tuple[int, int, int]]:
    """[(start, end, record_count)] of each v2 batch in `records`; validates magic, size, CRC."""
    out = []
    pos, total = 0, len(records)
    while pos < total:
        if total - pos < BATCH_HEADER_SIZE:
            raise CorruptBatchError(f"truncated record batch header at byte {pos}")
        _, length = _LEN.unpack_from(records, pos)
        end = pos + 12 + length
        if length < BATCH_HEADER_SIZE - 12 or end > total:
            raise CorruptBatchError(f"record batch at byte {pos} has invalid length {length}")
        if records[pos + 16] != 2:
            raise CorruptBatchError(f"record batch at byte {pos} has magic {records[pos + 16]}")
        (crc,) = struct.unpack_from(">I", records, pos + 17)
        if crc != crc32c(memoryview(records)[pos + 21 : end]):
            raise CorruptBatchError(f"record batch at byte {pos} fails its CRC check")
        _, last_delta = _ATTR_LOD.unpack_from(records, pos + 21)
        out.append((pos, end, last_delta + 1))
        pos = end
    return out


class PartitionLog:
    """Append-only log of one partition; `path=None` keeps it in memory."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.bases = array("q")
        self.positions = array("q")
        self.max_timestamps = array("q")
        self.next_offset = 0
        self.log_start_offset = 0
        self.size = 0
        # producer id -> deque of (epoch, first sequence, last sequence, base offset)
        self.producers: dict[int, deque[tuple[int, int, int, int]]] = {}
        self._buf: bytearray | None = None
        self._fd: int | None = None
        if path is None:
            self._buf = bytearray()
        else:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            self._recover()

    def _recover(self) -> None:
        assert self._fd is not None
        file_size = os.fstat(self._fd).st_size
        pos = 0
        while pos + BATCH_HEADER_SIZE <= file_size:
            head = os.pread(self._fd, BATCH_HEADER_SIZE, pos)
            base, length = _LEN.unpack_from(head)
            end = pos + 12 + length
            if end > file_size or length < BATCH_HEADER_SIZE - 12:
                break
            _, last_delta = _ATTR_LOD.unpack_from(head, 21)
            _, max_ts = _TS.unpack_from(head, 27)
            self._remember(head, 0, last_delta + 1, base)
            self.bases.append(base)
            self.positions.append(pos)
            self.max_timestamps.append(max_ts)
            self.next_offset = base + last_delta + 1
            pos = end
        if pos != file_size:
            log.warning(
                "truncating %s: %d bytes of torn batch at its end", self.path, file_size - pos
            )
            os.ftruncate(self._fd, pos)
        self.size = pos
        os.lseek(self._fd, pos, os.SEEK_SET)

    def _remember(self, data: bytes | bytearray, start: int, count: int, base: int) -> None:
        producer_id, epoch, sequence = _PRODUCER.unpack_from(data, start + 43)
        if producer_id < 0 or sequence < 0:
            return
        kept = self.producers.setdefault(producer_id, deque(maxlen=PRODUCER_BATCHES_KEPT))
        if kept and kept[-1][0] != epoch:
            kept.clear()  # a new epoch starts a new sequence
        kept.append((epoch, sequence, sequence + count - 1, base))

    def duplicate_of(self, records: bytes, batches: list[tuple[int, int, int]]) -> int | None:
        """Base offset of the earlier append of these idempotent batches, if they are a retry."""
        start, _, count = batches[0]
        producer_id, epoch, sequence = _PRODUCER.unpack_from(records, start + 43)
        if producer_id < 0 or sequence < 0:
            return None
        for kept_epoch, first, last, base in self.producers.get(producer_id, ()):
            if (kept_epoch, first, last) == (epoch, sequence, sequence + count - 1):
                return base
        return None

    def append(self, records: bytes, batches: list[tuple[int, int, int]]) -> int:
        """Append the batches of `records` (as split by split_batches); returns the base offset."""
        first = self.next_offset
        data = bytearray(records)
        offset = first
        for start, end, count in batches:
            _BASE_AND_EPOCH.pack_into(data, start, offset, end - start - 12, 0)
            self.bases.append(offset)
            self.positions.append(self.size + start)
            self.max_timestamps.append(_TS.unpack_from(data, start + 27)[1])
            self._remember(data, start, count, offset)
            offset += count
        if self._buf is not None:
            self._buf += data
        else:
            assert self._fd is not None
            os.write(self._fd, data)
        self.size += len(data)
        self.next_offset = offset
        return first

    def sync(self) -> None:
        """Make appended bytes durable (no-op in memory)."""
        if self._fd is not None:
            os.fsync(self._fd)

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding `offset`, at least one batch, else <= max_bytes."""
        if offset >= self.next_offset or not self.bases:
            return b""
        i = max(bisect_right(self.bases, offset) - 1, 0)
        start = self.positions[i]
        limit = start + max(max_bytes, 0)
        if self.size <= limit:
            end = self.size
        else:
            m = bisect_right(self.positions, limit, i + 1) - 1
            if m > i:
                end = self.positions[m]
            else:
                end = self.positions[i + 1] if i + 1 < len(self.positions) else self.size
        return self._slice(start, end)

    def _slice(self, start: int, end: int) -> bytes:
        if self._buf is not None:
            with memoryview(self._buf) as view:  # one copy, and the view is released at once
                return bytes(view[start:end])
        assert self._fd is not None
        return os.pread(self._fd, end - start, start)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp`, or None."""
        for i, max_ts in enumerate(self.max_timestamps):
            if max_ts < timestamp:
                continue
            end = self.positions[i + 1] if i + 1 < len(self.positions) else self.size
            batch = self._slice(self.positions[i], end)
            found = _first_record_at_or_after(batch, timestamp)
            return found if found is not None else (self.bases[i], max_ts)
        return None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def has_keyless_record(records: bytes, batches: list[tuple[int, int, int]]) -> bool:
    """True if an uncompressed batch holds a record without a key (Kafka refuses those on a
    compacted topic; compressed batches are not opened here)."""
    for start, _, count in batches:
        attributes, _ = _ATTR_LOD.unpack_from(records, start + 21)
        if attributes & 0x07:
            continue
        pos = start + BATCH_HEADER_SIZE
        for _ in range(count):
            length, n = read_signed_varint(records, pos)
            body = pos + n
            _, n2 = read_signed_varlong(records, body + 1)
            _, n3 = read_signed_varint(records, body + 1 + n2)
            key_length, _ = read_signed_varint(records, body + 1 + n2 + n3)
            if key_length < 0:
                return True
            pos = body + length
    return False


def _first_record_at_or_after(batch: bytes, timestamp: int) -> tuple[int, int] | None:
    attributes, _ = _ATTR_LOD.unpack_from(batch, 21)
    if attributes & 0x07:  # compressed: batch granularity only
        return None
    base_offset = _LEN.unpack_from(batch)[0]
    base_ts, _ = _TS.unpack_from(batch, 27)
    (count,) = struct.unpack_from(">i", batch, 57)
    pos = BATCH_HEADER_SIZE
    for _ in range(count):
        length, n = read_signed_varint(batch, pos)
        body = pos + n
        ts_delta, n2 = read_signed_varlong(batch, body + 1)
        offset_delta, _ = read_signed_varint(batch, body + 1 + n2)
        if base_ts + ts_delta >= timestamp:
            return base_offset + offset_delta, base_ts + ts_delta
        pos = body + length
    return None
