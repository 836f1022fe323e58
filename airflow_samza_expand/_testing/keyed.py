"""A second keyed processor, for tests and benchmarks with two different jobs on one topic.

`SequenceDigest` keeps other state than the shipped `SequenceCounter` and checks order another
way: a key's n-th record (from 0) must carry ``seq == n`` (a position check, so a key whose
state was lost restarts at 0 and every later record is a violation), and the state folds each
``seq`` into an order-sensitive CRC32 chain. `expected_digest(n)` is the chain of 0..n-1: a key
whose final digest equals it saw exactly its n records in order.

Output (one per key per micro-batch): ``{"key", "count", "violations", "digest", "task"}`` -
``count`` and ``violations`` as `_demo.verify.check_outputs` reads them.
"""

from __future__ import annotations

import zlib
from typing import Any

import pandas as pd

from airflow_samza_expand.spark._processor import parse_seq

PATH = "airflow_samza_expand._testing.keyed:SequenceDigest"


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


__all__ = ["PATH", "SequenceDigest", "expected_digest", "fold"]
