"""Stale placements before the snapshot, from the job's own count (docs/design.md 'Stale placements'
says who counts): when the barrier may take it (`job_coverage`), what the evidence keeps
(`with_job_count`, ``counted_by``), the record."""

from __future__ import annotations

import pytest

from airflow_samza_expand._protocol.barrier.rule import job_coverage, next_target
from airflow_samza_expand.core._order import (
    JOB_SOURCE,
    SCAN_SOURCE,
    JobStaleCount,
    OrderEvidence,
)
from airflow_samza_expand.core._stale import StalePlacement, StaleSummary

START = {"orders": {0: 100, 1: 200}}


def ends(a: int, b: int) -> dict[str, dict[int, int]]:
    return {"orders": {0: a, 1: b}}


def test_caught_up_means_checked_up_to_the_previous_look():
    # the job checked up to what the barrier saw at its previous look: caught up, although
    # producers appended since (the job reads them in its next batch)
    seen = job_coverage(ends(150, 260), START, ends(150, 250), ends(170, 290))
    assert seen.usable and seen.caught_up and seen.backlog == 20 + 30


def test_behind_the_previous_look_is_not_caught_up():
    seen = job_coverage(ends(140, 260), START, ends(150, 250), ends(170, 290))
    assert seen.usable and not seen.caught_up and seen.backlog == 30 + 30


def test_first_look_needs_the_current_end_offsets():
    assert not job_coverage(ends(150, 260), START, None, ends(151, 260)).caught_up
    assert job_coverage(ends(151, 260), START, None, ends(151, 260)).caught_up


def test_a_count_behind_what_the_evidence_covers_is_not_taken():
    # the barrier's earlier scan reached 180 on partition 0: a count at 150 would lose it
    seen = job_coverage(ends(150, 300), ends(180, 200), ends(150, 250), ends(170, 290))
    assert not seen.usable and not seen.caught_up


def test_a_partition_the_count_does_not_name_is_not_checked():
    seen = job_coverage({"orders": {0: 500}}, START, None, ends(150, 250))
    assert not seen.usable and seen.backlog == 250


def placement(offset: int) -> StalePlacement:
    return StalePlacement("orders", 0, offset, f"k{offset}", 2)


def test_the_evidence_takes_the_count_whole_and_says_who_counted():
    scanned = OrderEvidence(scan_start=START).with_scan(ends(120, 200), [placement(110)], "t1")
    assert scanned.counted_by == SCAN_SOURCE and scanned.before_snapshot.records == 1
    # the job's count covers the scanned range too (from the scan start): it replaces it
    summary = StaleSummary().add([placement(110), placement(130)])
    count = JobStaleCount("e1", "proc-1", 1, ends(150, 260), summary, "t2", records=110)
    taken = scanned.with_job_count(count)
    assert taken.before_snapshot.records == 2
    assert taken.scan_positions == ends(150, 260) and taken.last_stale_at == "t2"
    assert taken.counted_by.startswith(JOB_SOURCE) and "proc-1" in taken.counted_by
    # a scan after it (the processor died) adds on from the count's positions
    later = taken.with_scan(ends(160, 260), [placement(155)], "t3")
    assert later.before_snapshot.records == 3
    assert later.counted_by == f"{taken.counted_by} and {SCAN_SOURCE}"
    assert OrderEvidence.from_dict(later.with_ends(ends(1, 2)).to_dict()) == later.with_ends(
        ends(1, 2)
    )


def test_the_count_record_round_trips_and_names_a_malformed_one():
    summary = StaleSummary().add([placement(101)])
    count = JobStaleCount("e1", "proc-1", 3, START, summary, "t", "u", records=7, rescanned=2)
    assert JobStaleCount.from_dict(count.to_dict()) == count
    with pytest.raises(ValueError, match="malformed stale-count record"):
        JobStaleCount.from_dict({"expansion_id": "e1"})


def test_the_target_stays_until_the_count_reaches_it():
    """A job always a batch behind the producers still catches up: the target does not move
    with every look (a poll interval shorter than the job's batch would never be reached)."""
    target = None
    checked, now, caught = 100, 100, []
    for _look in range(12):
        now += 10  # producers append 10 records between two looks
        checked = now - 25  # the job is 25 records (2.5 looks) behind, always
        seen = job_coverage(ends(checked, 200), START, target, ends(now, 200))
        caught.append(seen.caught_up)
        target = next_target(seen, target, ends(now, 200))
    assert any(caught)
    # with the target moved at every look the same job would never be caught up
    assert not any(
        job_coverage(ends(n - 25, 200), START, ends(n - 10, 200), ends(n, 200)).caught_up
        for n in range(110, 230, 10)
    )
