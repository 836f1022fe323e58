"""The join of two streams sharing their keys (`examples/join_job.join_step`, the shipped job's
processor form `_testing.keyed.OrderPaymentJoin`) and its verifier (`_demo.verify.check_join`),
without Spark; tests/e2e/test_e2e_two_streams.py runs both across two growths."""

from __future__ import annotations

import json

import pandas as pd

from airflow_samza_expand._demo.verify import check_join
from airflow_samza_expand._testing.keyed import JOIN_PATH, OrderPaymentJoin
from airflow_samza_expand.examples.join_job import join_step
from airflow_samza_expand.spark._processor import load_processor


def rows(records: list[tuple[str, int]], task: str = "Partition 0") -> pd.DataFrame:
    """One key's rows as the job gives them: sorted by (topic, partition, offset)."""
    ordered = sorted(records, key=lambda r: r[0])  # a stable sort: each stream in its order
    return pd.DataFrame({
        "key": ["k"] * len(ordered), "task": [task] * len(ordered),
        "topic": [topic for topic, _ in ordered],
        "value": [json.dumps({"key": "k", "seq": seq}).encode() for _, seq in ordered],
    })  # fmt: skip


def test_each_payment_meets_the_order_of_its_sequence_number_across_batches() -> None:
    # payment 1 comes before order 1: it waits, and meets it in the next batch
    state = join_step((0, 0, 0, 0), [("j-orders", 0), ("j-payments", 0), ("j-payments", 1)])
    assert state == (1, 2, 1, 0)
    assert join_step(state, [("j-orders", 1), ("j-orders", 2)]) == (3, 2, 2, 0)
    # a lost, repeated or reordered record of either stream is a violation of that stream
    assert join_step((0, 0, 0, 0), [("j-orders", 1), ("j-payments", 0)])[3] == 1
    assert join_step((2, 2, 2, 0), [("j-payments", 1)])[3] == 1


def test_the_processor_keeps_the_join_in_the_keys_state() -> None:
    join = load_processor(JOIN_PATH)
    assert isinstance(join, OrderPaymentJoin)
    state = join.init_state()
    state, out = join.process(state, rows([("t-payments", 0), ("t-orders", 0), ("t-orders", 1)]))
    state, out = join.process(state, rows([("t-payments", 1), ("t-orders", 2)]))
    assert out == [{"key": "k", "task": "Partition 0", "count": 5, "orders": 3, "payments": 2,
                    "joined": 2, "violations": 0}]  # fmt: skip
    # a task that never saw the key's orders (its partitions split over two tasks): no join
    _, split = join.process(join.init_state(), rows([("t-payments", 0), ("t-payments", 1)]))
    assert split[0]["joined"] == 0 and split[0]["violations"] == 0


def test_the_verifier_holds_each_keys_join_exact_and_never_going_back() -> None:
    def out(orders: int, payments: int) -> dict:
        return {"orders": orders, "payments": payments, "joined": min(orders, payments)}

    good = {"a": [out(1, 0), out(2, 1), out(4, 2)], "b": [out(2, 2)]}
    assert check_join(good, {"a": 4, "b": 2}, {"a": 2, "b": 2}) == ({}, [])
    # the key's payments counted in another task after the growth: its state began again
    reset = {"a": [out(2, 1), out(3, 0), out(4, 2)]}
    mismatches, problems = check_join(reset, {"a": 4}, {"a": 2})
    assert mismatches == {"a": {"payments went back": 1, "joined went back": 1}}, problems
    # a payment that never met its order, a key without outputs
    short = {"a": [{"orders": 4, "payments": 2, "joined": 1}]}
    mismatches, _ = check_join(short, {"a": 4, "b": 1}, {"a": 2, "b": 0})
    assert mismatches == {"a": {"joined": (2, 1)}, "b": {"orders": (1, 0)}}
