"""The barrier's snapshot decision under stale placements, the evidence record, the order line."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_samza_expand._protocol.barrier.rule import decide_snapshot
from airflow_samza_expand.core._order import (
    OrderEvidence,
    check_on_stale_placement,
    order_line,
    order_report,
)
from airflow_samza_expand.core._stale import StalePlacement, StaleSummary

T0 = 1_000_000.0  # the expansion


def decide(now, *, grace=60.0, quiet=30.0, last=None, caught_up=True, deadline=None, n=0):
    return decide_snapshot(
        now=T0 + now,
        expanded_at=T0,
        grace_ends=T0 + grace,
        deadline=None if deadline is None else T0 + deadline,
        stale_quiet_s=quiet,
        last_stale_at=None if last is None else T0 + last,
        stale_records=n,
        caught_up=caught_up,
        backlog=0 if caught_up else 12,
    )


def test_fresh_producers_snapshot_at_the_end_of_the_grace():
    assert decide(59).action == "wait" and "grace" in decide(59).reason
    assert decide(59).wait_s == pytest.approx(1)
    assert decide(60).action == "snapshot"


def test_a_stale_placement_late_in_the_grace_extends_it_by_the_quiet_window():
    d = decide(61, last=50, n=3)
    assert d.action == "wait"
    assert "stale placements still arriving (3 so far" in d.reason
    assert d.wait_s == pytest.approx(19)
    done = decide(80, last=50, n=3)
    assert done.action == "snapshot"
    assert "3 stale placement(s) before it, held by the barrier" in done.reason


def test_the_quiet_window_is_watched_even_with_a_short_grace():
    d = decide(5, grace=0, quiet=30)
    assert d.action == "wait" and "none so far" in d.reason
    assert decide(30, grace=0, quiet=30).action == "snapshot"
    assert decide(0, grace=0, quiet=0).action == "snapshot"


def test_an_unread_backlog_blocks_the_snapshot():
    d = decide(100, caught_up=False)
    assert d.action == "wait" and "checking 12 record(s)" in d.reason and d.wait_s == 0


def test_timeout_while_stale_placements_keep_coming():
    d = decide(300, last=290, n=40, deadline=300)
    assert d.action == "timeout"
    assert "stale placements still arriving (40 so far" in d.reason
    # at the deadline a barrier that may snapshot still does
    assert decide(300, last=100, n=40, deadline=300).action == "snapshot"
    # the suggested wait never passes the deadline
    assert decide(290, last=289, n=1, deadline=295).wait_s == pytest.approx(5)


@settings(max_examples=300, deadline=None)
@given(
    now=st.integers(0, 10_000).map(lambda n: n / 10),  # tenths of a second: exact sums
    grace=st.integers(0, 4000).map(lambda n: n / 10),
    quiet=st.integers(0, 1000).map(lambda n: n / 10),
    last=st.one_of(st.none(), st.integers(0, 10_000).map(lambda n: n / 10)),
    caught_up=st.booleans(),
)
def test_snapshot_only_after_grace_and_a_quiet_window(now, grace, quiet, last, caught_up):
    if last is not None and last > now:
        last = now
    d = decide(now, grace=grace, quiet=quiet, last=last, caught_up=caught_up)
    quiet_from = T0 + (last if last is not None else 0.0)  # epoch seconds, as the rule compares
    allowed = T0 + now >= T0 + grace and T0 + now >= quiet_from + quiet and caught_up
    assert (d.action == "snapshot") == allowed
    assert d.reason


def test_bad_quiet_window_is_named():
    with pytest.raises(ValueError, match="stale_quiet_s must be >= 0"):
        decide(1, quiet=-1)


def placements(n, keys, start=100):
    return [StalePlacement("orders", 1, start + i, keys[i % len(keys)], 3) for i in range(n)]


def test_order_line_proven_names_the_held_count():
    before = StaleSummary().add(placements(7, ["a", "b"]))
    assert order_line(before, StaleSummary()) == (
        "order: proven (0 stale placements after the snapshot; 7 before it, held by the barrier)"
    )
    assert order_line(StaleSummary(), StaleSummary()).startswith("order: proven (0 stale")


def test_order_line_at_risk_names_records_keys_and_examples():
    after = StaleSummary().add(placements(5, ["user-9", "user-4"]))
    line = order_line(StaleSummary(), after)
    assert line.startswith("order: at risk - 5 records of 2 keys (examples key 'user-9' at ")
    assert "orders[1]@100, belongs in orders[3]" in line
    report = order_report(StaleSummary(), after)
    assert report["order"] == "at risk"
    assert report["keys_at_risk"] == [
        {"key": "user-4", "records": 2},
        {"key": "user-9", "records": 3},
    ]
    assert report["stale_after_snapshot"] == 5 and report["line"] == line


def test_evidence_accumulates_and_round_trips():
    evidence = OrderEvidence(partitioner=("crc32",), scan_start={"orders": {0: 5, 1: 7}})
    evidence = evidence.with_scan({"orders": {0: 9, 1: 7}}, placements(2, ["k"]), "t1")
    evidence = evidence.with_scan({"orders": {0: 12, 1: 8}}, [], "t2")
    assert evidence.before_snapshot.records == 2 and evidence.last_stale_at == "t1"
    evidence = evidence.with_job_placements(StaleSummary().add(placements(1, ["z"])))
    assert OrderEvidence.from_dict(evidence.to_dict()) == evidence
    assert OrderEvidence.from_dict({}) == OrderEvidence() == OrderEvidence.from_dict(None)
    with pytest.raises(ValueError, match="malformed stale_placements"):
        OrderEvidence.from_dict({"scan_start": {"orders": {"x": 1}}})


def test_on_stale_placement_choices():
    assert check_on_stale_placement("fail") == "fail"
    with pytest.raises(ValueError, match="give 'warn'"):
        check_on_stale_placement("ignore")


def test_keys_named_like_secrets_fit_in_an_expansion_record():
    """Record keys are data, never JSON object keys: the record's secret check must not trip."""
    from airflow_samza_expand.core._secrets import secret_paths

    after = StaleSummary().add(placements(2, ["password-reset-7", "sasl.user"]))
    evidence = OrderEvidence().with_job_placements(after)
    assert secret_paths(evidence.to_dict()) == []
    assert secret_paths(order_report(StaleSummary(), after)) == []
