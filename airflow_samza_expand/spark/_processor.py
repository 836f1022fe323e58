"""The pluggable keyed processor of the stateful job, and the shipped sequence-checking counter.

A keyed processor is any object with two methods (see `KeyedProcessor`):

* ``init_state() -> dict`` - the state of a key never seen before (JSON-serialisable);
* ``process(state, rows) -> (state, outputs)`` - apply one micro-batch of one key's records.
  ``rows`` is a pandas DataFrame with the columns of `ROW_COLUMNS`, all of one ``(task, key)``,
  already sorted by ``(topic, partition, offset)`` (for one input stream: ``(partition, offset)``).
  It returns the new state (JSON-serialisable dict) and a list of output dicts; each output is
  written to the output topic as a JSON value whose record key is the input key.

Give it to the job by dotted path: ``--processor mypackage.mymodule:MyProcessor`` (or
``mypackage.mymodule.MyProcessor``); a class is instantiated without arguments, any other object
is used as is. The module must be importable on the driver and every executor.
"""

from __future__ import annotations

import importlib
import json
from typing import Any, Protocol, runtime_checkable

import pandas as pd

# Columns of the rows given to `KeyedProcessor.process` (and of the source's DataFrame).
ROW_COLUMNS: tuple[str, ...] = (
    "task",
    "topic",
    "partition",
    "offset",
    "key",
    "value",
    "timestamp",
)

# The producer sequence number of a key's first record. Each later record of the same key from
# the same producer carries the previous number + 1.
FIRST_SEQ = 0

_decode = json.JSONDecoder().decode

DEFAULT_PROCESSOR = "airflow_samza_expand.spark._processor:SequenceCounter"


@runtime_checkable
class KeyedProcessor(Protocol):
    """Per-key state machine run by the job inside Spark's state store."""

    def init_state(self) -> dict[str, Any]:
        """State of a key seen for the first time."""
        ...

    def process(
        self, state: dict[str, Any], rows: pd.DataFrame
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Apply ``rows`` (one key, in order) to ``state``; return (new state, outputs)."""
        ...


def parse_seq(value: bytes | None) -> int | None:
    """The integer ``seq`` field of a JSON object value, or None when there is none."""
    if value is None:
        return None
    try:
        doc = _decode(value.decode("utf-8") if isinstance(value, bytes | bytearray) else value)
    except (ValueError, UnicodeDecodeError, TypeError):
        return None
    if not isinstance(doc, dict):
        return None
    seq = doc.get("seq")
    if isinstance(seq, bool) or not isinstance(seq, int):
        return None
    return seq


class SequenceCounter:
    """Counts records per key and checks each key's producer sequence number.

    Record values are JSON objects with an integer ``"seq"``: a key's first record has
    ``seq == FIRST_SEQ`` (0) and each next one the previous + 1. A record whose ``seq`` is not
    the expected one (lost, repeated or reordered record, or a key whose state was lost) counts
    one violation; checking continues from the record's own ``seq``. Values without an integer
    ``seq`` are counted but not checked.

    Output (one per key per micro-batch): ``{"key", "count", "last_seq", "task", "violations"}``.
    """

    def init_state(self) -> dict[str, Any]:
        return {"count": 0, "last_seq": None, "violations": 0}

    def process(
        self, state: dict[str, Any], rows: pd.DataFrame
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        count = int(state["count"])
        last_seq = state["last_seq"]
        violations = int(state["violations"])
        for value in rows["value"]:
            count += 1
            seq = parse_seq(value)
            if seq is None:
                continue
            expected = FIRST_SEQ if last_seq is None else last_seq + 1
            if seq != expected:
                violations += 1
            last_seq = seq
        new_state = {"count": count, "last_seq": last_seq, "violations": violations}
        output = {
            "key": rows["key"].iat[0],
            "count": count,
            "last_seq": last_seq,
            "task": rows["task"].iat[0],
            "violations": violations,
        }
        return new_state, [output]


def load_processor(path: str) -> KeyedProcessor:
    """Import ``module:attr`` or ``module.attr``; instantiate it when it is a class.

    Raises ValueError naming the problem and the fix.
    """
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise ValueError(
            f"processor {path!r} is not a dotted path - give 'package.module:ClassName'"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(
            f"cannot import module {module_name!r} of processor {path!r}: {exc} - "
            "install it on the driver and every executor (e.g. spark-submit --py-files)"
        ) from None
    try:
        target = getattr(module, attr)
    except AttributeError:
        raise ValueError(
            f"module {module_name!r} has no attribute {attr!r} (processor {path!r}) - "
            "check the name after the ':'"
        ) from None
    processor = target() if isinstance(target, type) else target
    if not isinstance(processor, KeyedProcessor):
        raise ValueError(
            f"processor {path!r} lacks init_state() and process(state, rows) - "
            "implement airflow_samza_expand.spark._processor.KeyedProcessor"
        )
    return processor
