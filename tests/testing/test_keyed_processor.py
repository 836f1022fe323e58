"""The second keyed processor of the multi-job tests (`_testing.keyed.SequenceDigest`)."""

from __future__ import annotations

import json

import pandas as pd

from airflow_samza_expand._testing.keyed import PATH, SequenceDigest, expected_digest
from airflow_samza_expand.spark._processor import KeyedProcessor, load_processor


def rows(seqs: list[int], key: str = "k") -> pd.DataFrame:
    values = [json.dumps({"key": key, "seq": s}).encode() for s in seqs]
    return pd.DataFrame({"key": [key] * len(seqs), "task": ["Partition 0"] * len(seqs),
                         "value": values})  # fmt: skip


def run(batches: list[list[int]]) -> dict:
    p = SequenceDigest()
    state = p.init_state()
    out: list[dict] = []
    for batch in batches:
        state, out = p.process(state, rows(batch))
    return out[-1]


def test_in_order_records_give_the_expected_digest_and_no_violation() -> None:
    out = run([[0, 1, 2], [3, 4]])
    assert out == {"key": "k", "task": "Partition 0", "count": 5, "violations": 0,
                   "digest": expected_digest(5)}  # fmt: skip


def test_reordered_lost_or_repeated_records_are_caught() -> None:
    swapped = run([[0, 2, 1, 3, 4]])
    assert swapped["violations"] == 2 and swapped["digest"] != expected_digest(5)
    repeated = run([[0, 1, 1, 2]])
    assert repeated["count"] == 4 and repeated["violations"] == 2
    state_lost = SequenceDigest().process(SequenceDigest().init_state(), rows([3, 4]))[1][0]
    assert state_lost["violations"] == 2  # a key restarting from empty state mid-stream


def test_loads_by_its_dotted_path() -> None:
    assert isinstance(load_processor(PATH), KeyedProcessor)
