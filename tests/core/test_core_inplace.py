"""docs/design.md 'The switch in place': which partitions of vN+1 a running job may read
(parent before child, per parent)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_samza_expand.core._inplace import gated, parent, readable
from airflow_samza_expand.core.errors import ExpansionError

H1 = {"orders": {0: 100, 1: 50}}  # 2 -> 4
H2 = {"orders": {0: 300, 1: 200, 2: 40, 3: 30}}  # 4 -> 8


def pos(**offsets: int) -> dict[tuple[str, int], int]:
    return {("orders", int(k[1:])): v for k, v in offsets.items()}


def test_without_snapshots_every_partition_is_readable():
    assert readable({"orders": 4}, [], {}) == {("orders", p) for p in range(4)}


def test_a_child_waits_for_its_own_parent_only():
    now = readable({"orders": 4}, [H1], pos(p0=100, p1=49))
    assert now == {("orders", 0), ("orders", 1), ("orders", 2)}  # 3's parent 1 is behind
    assert gated({"orders": 4}, [H1], pos(p0=100, p1=49)) == {("orders", 3): (1, 50)}
    assert readable({"orders": 4}, [H1], pos(p0=100, p1=50)) == {("orders", p) for p in range(4)}


def test_a_parent_past_its_mark_admits_the_child():
    assert ("orders", 2) in readable({"orders": 4}, [H1], pos(p0=250))
    assert ("orders", 2) not in readable({"orders": 4}, [H1], pos(p0=99))


def test_no_position_is_offset_zero():
    empty = {"orders": {0: 0, 1: 7}}
    assert readable({"orders": 4}, [empty], {}) == {("orders", 0), ("orders", 1), ("orders", 2)}


def test_two_expansions_chain_through_the_grandparent():
    # 6 = child of 2 (4 -> 8), 2 = child of 0 (2 -> 4)
    assert parent("orders", 6, [H1, H2]) == (2, 40)
    assert parent("orders", 2, [H1, H2]) == (0, 100)
    assert parent("orders", 1, [H1, H2]) is None
    behind = pos(p0=99, p1=50, p2=40, p3=30)  # 2 past H2[2] but 2 itself is not admitted yet
    assert ("orders", 6) not in readable({"orders": 8}, [H1, H2], behind)
    done = pos(p0=300, p1=200, p2=40, p3=29)
    now = readable({"orders": 8}, [H1, H2], done)
    assert now == {("orders", p) for p in range(8)} - {("orders", 7)}


def test_a_stream_not_grown_is_read_whole():
    both = readable({"orders": 4, "users": 3}, [H1], pos(p0=0, p1=0))
    assert {("users", 0), ("users", 1), ("users", 2)} <= both
    assert ("orders", 2) not in both


def test_a_corrupt_snapshot_is_refused():
    with pytest.raises(ExpansionError, match="not 0..N-1"):
        readable({"orders": 4}, [{"orders": {0: 1, 2: 3}}], {})
    with pytest.raises(ExpansionError, match="negative"):
        readable({"orders": 4}, [{"orders": {0: -1, 1: 3}}], {})


@given(
    marks=st.lists(st.integers(0, 50), min_size=2, max_size=2),
    positions=st.lists(st.integers(0, 60), min_size=2, max_size=2),
)
def test_admitted_exactly_when_the_parent_reached_its_mark(marks, positions):
    snap = {"orders": {0: marks[0], 1: marks[1]}}
    at = {("orders", p): positions[p] for p in range(2)}
    now = readable({"orders": 4}, [snap], at)
    for child in (2, 3):
        assert (("orders", child) in now) == (positions[child % 2] >= marks[child % 2])
