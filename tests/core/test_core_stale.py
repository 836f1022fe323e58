"""Stale placements: property tests with both real partitioners and growth chains.

A fresh producer (one that knows the new count) never makes a stale placement; a producer that
still uses an older count makes one exactly when its key moved at the new count.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_samza_expand._kafka.partitioners import PARTITIONERS
from airflow_samza_expand.core._stale import (
    MAX_KEYS_KEPT,
    StalePlacement,
    StaleSummary,
    check_chain,
    check_growth,
    is_stale_placement,
    placed_with,
    stale_in_chain,
    stale_target,
)

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
partitioners = st.sampled_from(sorted(PARTITIONERS))
keys = st.binary(min_size=1, max_size=32)
growths = st.tuples(st.integers(1, 64), st.integers(1, 4)).map(lambda t: (t[0], t[0] << t[1]))
chains = st.tuples(st.integers(1, 16), st.lists(st.integers(1, 3), min_size=1, max_size=4)).map(
    lambda t: _chain(t[0], t[1])
)


def _chain(initial: int, steps: list[int]) -> list[int]:
    counts = [initial]
    for k in steps:
        counts.append(counts[-1] << k)
    return counts


@SETTINGS
@given(key=keys, growth=growths, name=partitioners, offset=st.integers(0, 10**6))
def test_a_fresh_producer_never_makes_a_stale_placement(key, growth, name, offset):
    old, new = growth
    partition_of = PARTITIONERS[name]
    partition = partition_of(key, new)
    assert not is_stale_placement(
        key,
        partition,
        offset,
        start_offset=0,
        old_count=old,
        new_count=new,
        partition_of=partition_of,
    )


@SETTINGS
@given(key=keys, growth=growths, name=partitioners, after=st.integers(0, 1000))
def test_an_old_count_placement_is_stale_exactly_when_its_key_moved(key, growth, name, after):
    old, new = growth
    partition_of = PARTITIONERS[name]
    placed = partition_of(key, old)  # the stale producer still uses the old count
    moved_to = partition_of(key, new)
    start = 500
    target = stale_target(
        key,
        placed,
        start + after,
        start_offset=start,
        old_count=old,
        new_count=new,
        partition_of=partition_of,
    )
    if moved_to != placed:
        assert target == moved_to
        assert moved_to % old == placed  # growth by 2^k: it moved to p + i * N_old
    else:
        assert target is None


@SETTINGS
@given(key=keys, growth=growths, name=partitioners, before=st.integers(1, 500))
def test_records_before_the_expansion_offset_are_never_stale(key, growth, name, before):
    old, new = growth
    partition_of = PARTITIONERS[name]
    placed = partition_of(key, old)
    assert not is_stale_placement(
        key,
        placed,
        500 - before,
        start_offset=500,
        old_count=old,
        new_count=new,
        partition_of=partition_of,
    )


@SETTINGS
@given(key=keys, counts=chains, name=partitioners, behind=st.integers(1, 4))
def test_chain_a_producer_any_number_of_growths_behind(key, counts, name, behind):
    """2 -> 4 -> 8: a producer on 2 or 4 places a moved key stale; one on 8 never."""
    partition_of = PARTITIONERS[name]
    last = counts[-1]
    assert (
        stale_in_chain(key, partition_of(key, last), counts=counts, partition_of=partition_of)
        is None
    )
    used = counts[max(0, len(counts) - 1 - behind)]
    placed = partition_of(key, used)
    target = stale_in_chain(key, placed, counts=counts, partition_of=partition_of)
    expected = None if partition_of(key, last) == placed else partition_of(key, last)
    assert target == expected
    if target is not None:
        assert placed_with(key, placed, counts, partition_of) in counts[:-1]
    assert placed_with(key, partition_of(key, last), counts, partition_of) == last


def test_the_two_partitioners_disagree_so_the_detected_one_matters():
    key = b"user-7"
    mm, crc = PARTITIONERS["murmur2"], PARTITIONERS["crc32"]
    placed = mm(key, 2)
    assert mm(key, 8) != crc(key, 8)
    stale_mm = stale_target(
        key, placed, 0, start_offset=0, old_count=2, new_count=8, partition_of=mm
    )
    assert stale_mm == (None if mm(key, 8) == placed else mm(key, 8))


def test_several_candidates_flag_only_what_every_candidate_calls_stale():
    mm, crc = PARTITIONERS["murmur2"], PARTITIONERS["crc32"]
    found = 0
    for i in range(200):
        key = f"k{i}".encode()
        for placed in range(4):
            both = stale_target(
                key, placed, 0, start_offset=0, old_count=4, new_count=8, partition_of=(mm, crc)
            )
            alone = [
                stale_target(
                    key, placed, 0, start_offset=0, old_count=4, new_count=8, partition_of=f
                )
                for f in (mm, crc)
            ]
            assert (both is not None) == all(a is not None for a in alone)
            found += both is not None
    assert found  # the combined rule still flags records


def test_keyless_records_and_new_partitions_are_never_stale():
    crc = PARTITIONERS["crc32"]
    for key in (None, b"", ""):
        assert not is_stale_placement(
            key, 0, 10, start_offset=0, old_count=2, new_count=4, partition_of=crc
        )
    key = next(k for k in (f"k{i}".encode() for i in range(100)) if crc(k, 4) == 1)
    # partition 3 is new at 2 -> 4: a record there is not in an old partition
    assert not is_stale_placement(
        key, 3, 10, start_offset=0, old_count=2, new_count=4, partition_of=crc
    )


def test_str_keys_hash_as_their_utf8_bytes():
    crc = PARTITIONERS["crc32"]
    for i in range(50):
        text = f"ключ-{i}"
        args = dict(start_offset=0, old_count=2, new_count=4, partition_of=crc)
        for p in range(2):
            assert stale_target(text, p, 0, **args) == stale_target(text.encode(), p, 0, **args)


@pytest.mark.parametrize(("old", "new"), [(2, 2), (4, 2), (2, 6), (0, 4), (3, 9), (2, True)])
def test_growth_must_be_a_power_of_two_multiple(old, new):
    with pytest.raises(ValueError, match="growth|positive"):
        check_growth(old, new)


def test_chain_validation_names_the_bad_step():
    check_chain([2, 4, 16])
    with pytest.raises(ValueError, match="4 -> 12"):
        check_chain([2, 4, 12])
    with pytest.raises(ValueError, match="at least two"):
        check_chain([4])


def test_summary_counts_per_key_and_round_trips():
    placements = [StalePlacement("orders", 0, 10 + i, f"k{i % 3}", 2) for i in range(7)]
    summary = StaleSummary().add(placements[:4]).add(placements[4:])
    assert summary.records == 7
    assert summary.keys == {"k0": 3, "k1": 2, "k2": 2}
    assert summary.key_count() == "3"
    assert summary.last_offset == {"orders": {0: 16}}
    assert len(summary.examples) == 5
    assert StaleSummary.from_dict(summary.to_dict()) == summary


def test_summary_stays_bounded_and_says_so():
    many = [StalePlacement("t", 0, i, f"key-{i}", 1) for i in range(MAX_KEYS_KEPT + 5)]
    summary = StaleSummary().add(many)
    assert summary.records == MAX_KEYS_KEPT + 5
    assert len(summary.keys) == MAX_KEYS_KEPT
    assert summary.key_count() == f"at least {MAX_KEYS_KEPT}"


def test_malformed_summary_is_named():
    with pytest.raises(ValueError, match="malformed stale placement summary"):
        StaleSummary.from_dict({"records": "many"})
