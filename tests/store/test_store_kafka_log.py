"""The coordinator log's rules, record by record (no broker): the log order decides."""

from __future__ import annotations

import json

from airflow_samza_expand.store._kafka_log import CoordinatorLog, encode_key, parse_key


def lease(epoch: int, released: bool = False) -> bytes:
    return json.dumps({"epoch": epoch, "released": released}).encode()


def replay(records):
    log = CoordinatorLog("topic")
    for offset, (key, value) in enumerate(records):
        log.apply(offset, key, value)
    return log


def compacted(records):
    """What compaction keeps: the last record per key, tombstones and all, in offset order."""
    last = {}
    for offset, (key, value) in enumerate(records):
        last[key] = (offset, value)
    return sorted((offset, key, value) for key, (offset, value) in last.items() if value)


def current(log, kind="expansion", key="e"):
    chain = log.chain(kind, key)
    return None if chain is None or chain.current is None else chain.current.value


def test_lowest_offset_wins_a_revision_and_stale_ones_are_ignored():
    k = lambda w, r, **kw: encode_key("expansion", "e", w, revision=r, **kw)  # noqa: E731
    log = replay(
        [
            (k("a", 1), b"a1"),
            (k("b", 2), b"b2"),  # first for revision 2: wins
            (k("a", 2), b"a2"),  # second for revision 2: ignored
            (k("c", 4), b"c4"),  # skips revision 3: ignored
            (k("a", 3), b"a3"),
        ]
    )
    assert current(log) == b"a3" and log.chain("expansion", "e").revision == 3
    assert sorted(log.chain("expansion", "e").obsolete()) == sorted(
        [k("a", 1), k("b", 2), k("a", 2)]
    )


def test_a_fenced_record_counts_only_under_its_epoch():
    lk = lambda w, r: encode_key("lease", "expansion", w, revision=r)  # noqa: E731
    ek = lambda w, r, e: encode_key(  # noqa: E731
        "expansion", "e", w, revision=r, fence=("expansion", e)
    )
    log = replay(
        [
            (lk("a", 1), lease(1)),
            (ek("a", 1, 1), b"a1"),  # holder a, epoch 1: counts
            (lk("b", 2), lease(2)),  # b took over
            (ek("a", 2, 1), b"a2"),  # a, still at epoch 1: ignored
            (ek("b", 2, 2), b"b2"),
            (lk("b", 3), lease(2, released=True)),
            (ek("b", 3, 2), b"b3"),  # after release: ignored
        ]
    )
    assert current(log) == b"b2"


def test_after_the_winner_tidies_compaction_keeps_the_same_answer():
    k = lambda w, r: encode_key("expansion", "e", w, revision=r)  # noqa: E731
    records = [(k("a", 1), b"a1"), (k("b", 2), b"b2"), (k("a", 2), b"a2")]
    log = replay(records)
    records += [(key, None) for key in log.chain("expansion", "e").obsolete()]
    assert current(replay(records)) == b"b2"
    kept = CoordinatorLog("topic")
    for offset, key, value in compacted(records):
        kept.apply(offset, key, value)
    assert current(kept) == b"b2"
    assert list(kept.chain("expansion", "e").live) == [k("b", 2)]


def test_keys_that_are_not_coordinator_keys():
    assert parse_key(b"not json") is None
    assert parse_key(encode_key("job-model", "x", "w")) is None
    assert parse_key(b'{"key":"e","revision":0,"type":"expansion","writer":"w"}') is None
    assert parse_key(b'{"fence":["expansion"],"key":"e","type":"expansion"}') is None
    parsed = parse_key(encode_key("lease", "active", "w", revision=3))
    assert (parsed.type, parsed.key, parsed.revision) == ("lease", "active", 3)
