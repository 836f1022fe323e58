"""Partition log of the development broker: offsets, fetch limits, timestamps, recovery."""

from __future__ import annotations

import datetime
import io
from pathlib import Path

import pytest
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch

from airflow_samza_expand._testing.broker.storage import (
    CorruptBatchError,
    PartitionLog,
    split_batches,
)

T0 = 1_700_000_000_000


def _batch(n: int, ts0: int = T0, value_size: int = 10) -> bytes:
    records = tuple(
        Record(
            attributes=0,
            timestamp=datetime.datetime.fromtimestamp((ts0 + i) / 1000, datetime.UTC),
            offset=i,
            key=b"k%d" % i,
            value=b"x" * value_size,
            headers=(),
        )
        for i in range(n)
    )
    buf = io.BytesIO()
    write_new_batch(
        buf,
        NewRecordBatch(
            producer_id=-1, producer_epoch=-1, base_sequence=-1, records=records, attributes=0
        ),
    )
    return buf.getvalue()


def _append(plog: PartitionLog, data: bytes) -> int:
    return plog.append(data, split_batches(data))


@pytest.mark.parametrize("on_disk", [False, True])
def test_offsets_are_assigned_and_batches_stay_valid(tmp_path: Path, on_disk: bool) -> None:
    plog = PartitionLog(tmp_path / "0.log" if on_disk else None)
    assert _append(plog, _batch(3)) == 0
    assert _append(plog, _batch(2) + _batch(4)) == 3
    assert plog.next_offset == 9
    data = plog.read(0, 1 << 20)
    offsets = []
    pos = 0
    while pos < len(data):
        batch, size = read_batch(data, pos)  # verifies the CRC too
        offsets += [r.offset for r in batch.records]
        pos += size
    assert offsets == list(range(9))


def test_read_starts_at_the_batch_holding_the_offset_and_respects_max_bytes() -> None:
    plog = PartitionLog()
    sizes = []
    for _ in range(5):
        b = _batch(10, value_size=50)
        sizes.append(len(b))
        _append(plog, b)
    one = plog.read(25, 1)  # at least one whole batch even over the limit
    assert read_batch(one, 0)[0].base_offset == 20 and len(one) == sizes[2]
    two = plog.read(20, sizes[2] + sizes[3])
    assert len(two) == sizes[2] + sizes[3]
    assert plog.read(50, 1000) == b""


def test_offset_for_timestamp_finds_first_record_at_or_after() -> None:
    plog = PartitionLog()
    _append(plog, _batch(5, ts0=T0))
    _append(plog, _batch(5, ts0=T0 + 100))
    assert plog.offset_for_timestamp(T0 + 3) == (3, T0 + 3)
    assert plog.offset_for_timestamp(T0 + 50) == (5, T0 + 100)
    assert plog.offset_for_timestamp(T0 + 1000) is None


def test_corrupt_batches_are_refused() -> None:
    good = bytearray(_batch(2))
    good[-1] ^= 0xFF
    with pytest.raises(CorruptBatchError, match="CRC"):
        split_batches(bytes(good))
    with pytest.raises(CorruptBatchError, match="truncated"):
        split_batches(_batch(2)[:30])


def test_recovery_truncates_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    plog = PartitionLog(path)
    _append(plog, _batch(3))
    _append(plog, _batch(3))
    plog.close()
    with open(path, "ab") as fh:
        fh.write(_batch(3)[:40])
    again = PartitionLog(path)
    assert again.next_offset == 6
    assert _append(again, _batch(1)) == 6
