"""A second keyed processor, for tests and benchmarks with two different jobs on one topic.

`SequenceDigest` keeps other state than the shipped `SequenceCounter` and checks order another
way: a key's n-th record (from 0) must carry ``seq == n`` (a position check, so a key whose
state was lost restarts at 0 and every later record is a violation), and the state folds each
``seq`` into an order-sensitive CRC32 chain. `expected_digest(n)` is the chain of 0..n-1: a key
whose final digest equals it saw exactly its n records in order.

Output (one per key per micro-batch): ``{"key", "count", "violations", "digest", "task"}`` -
``count`` and ``violations`` as `_demo.verify.check_outputs` reads them.

`OrderPaymentJoin` is the shipped job's processor form of `examples/join_job.py`: an order and a
payment of one key meet in the key's task (``join_step``), so the job model must keep both
streams' partitions of a key in one task across a growth.
"""

from __future__ import annotations

import zlib
from typing import Any

import pandas as pd

from airflow_samza_expand.examples.join_job import JOIN_FIELDS, join_step
from airflow_samza_expand.spark._processor import parse_seq

PATH = "airflow_samza_expand._testing.keyed:SequenceDigest"
JOIN_PATH = "airflow_samza_expand._testing.keyed:OrderPaymentJoin"


def fold(digest: int, seq: int) -> int:
    """The chain after one more ``seq``."""
    return zlib.crc32(str(seq).encode(), digest)


def expected_digest(count: int) -> int:
    """The digest of a key whose records 0..count-1 were processed once each, in order."""
    digest = 0
    for seq in range(count):
        digest = fold(digest, seq)
    return digest


class SequenceDigest:
    """Per key: count, position violations and the CRC32 chain of the seen ``seq`` numbers."""

    def init_state(self) -> dict[str, Any]:
        return {"count": 0, "violations": 0, "digest": 0}

    def process(
        self, state: dict[str, Any], rows: pd.DataFrame
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        count, violations = int(state["count"]), int(state["violations"])
        digest = int(state["digest"])
        for value in rows["value"]:
            seq = parse_seq(value)
            if seq != count:
                violations += 1
            digest = fold(digest, -1 if seq is None else seq)
            count += 1
        new_state = {"count": count, "violations": violations, "digest": digest}
        output = {"key": rows["key"].iat[0], "task": rows["task"].iat[0], **new_state}
        return new_state, [output]


class OrderPaymentJoin:
    """Per key: orders, payments, payments that met their order, violations (`join_step`)."""

    def init_state(self) -> dict[str, Any]:
        return dict.fromkeys(JOIN_FIELDS, 0)

    def process(
        self, state: dict[str, Any], rows: pd.DataFrame
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        # rows come sorted by (topic, partition, offset): each stream in its order
        before = tuple(int(state[name]) for name in JOIN_FIELDS)
        new = join_step(before, zip(rows["topic"], map(parse_seq, rows["value"]), strict=True))
        new_state = dict(zip(JOIN_FIELDS, new, strict=True))
        output = {"key": rows["key"].iat[0], "task": rows["task"].iat[0],
                  "count": new[0] + new[1], **new_state}  # fmt: skip
        return new_state, [output]


__all__ = [
    "JOIN_PATH", "PATH", "OrderPaymentJoin", "SequenceDigest", "expected_digest", "fold",
]  # fmt: skip
