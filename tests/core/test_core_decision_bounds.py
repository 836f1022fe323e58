"""The bounds of the barrier's snapshot rule and of the stale-placement rule, each at the
value where the decision turns (what the mutation run of scripts/mutation.sh found open): the
reasons the barrier logs while it waits, with their figures, and the stale rule's edges."""

from __future__ import annotations

import pytest

from airflow_samza_expand._protocol.barrier.rule import decide_snapshot
from airflow_samza_expand.core._stale import (
    check_growth,
    placed_with,
    stale_in_chain,
    stale_target,
)

T0 = 1_000_000.0


def test_each_wait_names_its_figures():
    common = dict(expanded_at=T0, grace_ends=T0 + 60, deadline=None, stale_quiet_s=30.0)
    grace = decide_snapshot(now=T0 + 20, last_stale_at=None, stale_records=0, caught_up=True,
                            **common)  # fmt: skip
    assert grace.reason == "producer refresh grace: 40 s left" and grace.wait_s == 40
    behind = decide_snapshot(now=T0 + 70, last_stale_at=None, stale_records=0, caught_up=False,
                             **common)  # fmt: skip
    assert behind.reason == (
        "checking 0 record(s) appended to the old partitions for stale placements"
    )  # the backlog by default: none counted
    assert behind.wait_s == 0.0  # look again at once
    watching = decide_snapshot(now=T0 + 10, last_stale_at=None, stale_records=0, caught_up=True,
                               **{**common, "grace_ends": T0})  # fmt: skip
    assert watching.reason == (
        "watching the old partitions for stale placements for 30 s after the expansion "
        "(20 s left, none so far)"
    )
    assert watching.wait_s == 20
    arriving = decide_snapshot(now=T0 + 70, last_stale_at=T0 + 50, stale_records=3,
                               caught_up=True, **common)  # fmt: skip
    assert arriving.reason.startswith("stale placements still arriving (3 so far, the last 20 s ")
    assert "(10 s left)" in arriving.reason and arriving.wait_s == 10


def test_at_the_end_of_the_grace_the_wait_is_for_the_quiet_window():
    decision = decide_snapshot(now=T0 + 60, expanded_at=T0, grace_ends=T0 + 60, deadline=None,
                               stale_quiet_s=30.0, last_stale_at=T0 + 50, stale_records=1,
                               caught_up=True)  # fmt: skip
    assert decision.reason.startswith("stale placements still arriving"), decision
    assert decision.wait_s == 20


@pytest.mark.parametrize(("now", "action"), [(89, "wait"), (90, "timeout"), (95, "timeout")])
def test_past_the_deadline_a_waiting_barrier_times_out(now, action):
    decision = decide_snapshot(now=T0 + now, expanded_at=T0, grace_ends=T0 + 120,
                               deadline=T0 + 90, last_stale_at=None, stale_records=0,
                               caught_up=True)  # fmt: skip
    assert decision.action == action, decision


def _last(raw: bytes, n: int) -> int:
    return n - 1


def _stale(partition, offset=5, *, start=0, partition_of=_last):
    return stale_target(b"k", partition, offset, start_offset=start, old_count=2, new_count=4,
                        partition_of=partition_of)  # fmt: skip


def test_the_stale_rule_at_its_edges():
    assert _stale(1) == 3  # an old partition, the key belongs in the last new one
    assert _stale(2) is None  # partition == old count: written with the new count
    assert _stale(1, offset=4, start=5) is None and _stale(1, offset=5, start=5) == 3
    # several candidate partitioners: stale only if each places it elsewhere; the first's
    both = [lambda raw, n: 2, lambda raw, n: 3]
    assert _stale(1, partition_of=both) == 2
    assert _stale(1, partition_of=[lambda raw, n: 1, lambda raw, n: 3]) is None


def test_a_chain_judges_only_the_old_partitions_of_its_last_growth():
    assert stale_in_chain(b"k", 1, counts=[2, 4], partition_of=_last) == 3
    assert stale_in_chain(b"k", 2, counts=[2, 4], partition_of=_last) is None  # a new one


@pytest.mark.parametrize("bad", [0, -2, True])
def test_a_growth_needs_positive_counts(bad):
    with pytest.raises(ValueError, match="must be a positive integer"):
        check_growth(bad, 4)
    with pytest.raises(ValueError, match="must be a positive integer"):
        check_growth(2, bad)


def test_a_placement_is_explained_by_the_newest_count_that_puts_the_key_there():
    at = {8: 0, 4: 3, 2: 1}  # the key's partition under each count

    def partition_of(raw: bytes, n: int) -> int:
        return at[n]

    assert placed_with(b"k", 1, [2, 4, 8], partition_of) == 2  # not 8: 0 is not 1
    assert placed_with(b"k", 3, [2, 4, 8], partition_of) == 4
    assert placed_with(b"k", 2, [2, 4, 8], partition_of) is None
    assert placed_with(None, 1, [2, 4, 8], partition_of) is None
