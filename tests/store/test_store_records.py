"""Expansion records in both coordinator stores: round trip, conditional updates, the race."""

from __future__ import annotations

import dataclasses
import inspect
import threading

import pytest
from store_fixtures import WriteGate, record

from airflow_samza_expand.core._clock import now_iso
from airflow_samza_expand.core._record import ExpansionStatus
from airflow_samza_expand.core.errors import (
    CorruptCoordinatorRecordError,
    InvalidTransitionError,
    SecretValueError,
    StaleRevisionError,
)
from airflow_samza_expand.store import CoordinatorStore, open_store
from airflow_samza_expand.store._files import FileCoordinatorStore
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore
from airflow_samza_expand.store._kafka_log import encode_key


def test_both_stores_implement_the_whole_protocol(tmp_path):
    members = {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(CoordinatorStore, inspect.isfunction)
        if not name.startswith("_")
    }
    assert {"put_expansion", "acquire_lease", "expansions", "get_lease"} <= members.keys()
    for cls in (KafkaCoordinatorStore, FileCoordinatorStore):
        for name, wanted in members.items():
            got = inspect.signature(getattr(cls, name))
            assert list(got.parameters) == list(wanted.parameters), (cls.__name__, name)
            kinds = [p.kind for p in got.parameters.values()]
            assert kinds == [p.kind for p in wanted.parameters.values()], (cls.__name__, name)
    files = open_store(str(tmp_path), "job-a")
    kafka = open_store("kafka", "job-a", {"bootstrap.servers": "127.0.0.1:1"})
    assert isinstance(files, FileCoordinatorStore) and isinstance(files, CoordinatorStore)
    assert isinstance(kafka, KafkaCoordinatorStore) and isinstance(kafka, CoordinatorStore)
    kafka.close()


def test_record_round_trip_and_revisions(make_store):
    store = make_store()
    assert store.get_expansion("exp-1") is None and store.expansions() == []
    first = store.put_expansion(record(store.job_name), expected_revision=0)
    assert first.revision == 1
    reader = make_store()
    assert reader.get_expansion("exp-1") == first
    second = first.advance(ExpansionStatus.EXPANDED).with_result("expand", {"orders": 4})
    second = reader.put_expansion(second, expected_revision=1)
    assert second.revision == 2
    assert store.get_expansion("exp-1") == second
    later = store.put_expansion(
        record(store.job_name, "exp-2", created_at="2099-01-01T00:00:00.000Z"), expected_revision=0
    )
    assert [r.expansion_id for r in make_store().expansions()] == ["exp-2", "exp-1"]
    assert make_store().expansions()[0] == later


def test_create_only_and_stale_update_are_rejected_with_the_current_record(make_store):
    store = make_store()
    stored = store.put_expansion(record(store.job_name), expected_revision=0)
    with pytest.raises(StaleRevisionError, match="expected revision 0") as caught:
        make_store().put_expansion(record(store.job_name, owner="other"), expected_revision=0)
    assert caught.value.current == stored
    newer = store.put_expansion(stored.advance("expanded"), expected_revision=1)
    with pytest.raises(StaleRevisionError, match="revision 2") as caught:
        store.put_expansion(stored.advance("failed"), expected_revision=1)
    assert caught.value.current == newer
    assert make_store().get_expansion("exp-1") == newer


def test_two_writers_racing_keep_every_field(make_store):
    """Both contenders pass the revision check and reach the write (a barrier holds each at
    its write until both are there); the store takes exactly one; the loser re-reads, re-applies
    its own change and writes again: the record ends with both changes."""
    setup = make_store()
    base = setup.put_expansion(record(setup.job_name), expected_revision=0)
    a, b = make_store(), make_store()
    gate = WriteGate(2)
    gate.gate(a)
    gate.gate(b)
    changes = {
        "a": lambda r: r.with_result("expand", {"orders": {"partitions": 4}}),
        "b": lambda r: r.with_step("barrier", started_at=now_iso()),
    }
    outcome: dict[str, object] = {}

    def contend(name, store):
        try:
            outcome[name] = store.put_expansion(changes[name](base), expected_revision=1)
        except StaleRevisionError as exc:
            outcome[name] = exc

    threads = [threading.Thread(target=contend, args=item) for item in (("a", a), ("b", b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert gate.arrived == 2  # both reached the write
    losers = [n for n, o in outcome.items() if isinstance(o, StaleRevisionError)]
    winners = [n for n, o in outcome.items() if not isinstance(o, StaleRevisionError)]
    assert len(losers) == 1 and len(winners) == 1, outcome
    loser = losers[0]
    current = outcome[loser].current
    assert current is not None and current.revision == 2
    loser_store = a if loser == "a" else b
    redone = loser_store.put_expansion(changes[loser](current), expected_revision=2)
    final = make_store().get_expansion("exp-1")
    assert final == redone and final.revision == 3
    assert final.results["expand"] == {"orders": {"partitions": 4}}
    assert final.steps["barrier"].started_at is not None


def test_a_record_holding_a_secret_is_never_written(make_store):
    store = make_store()
    stored = store.put_expansion(record(store.job_name), expected_revision=0)
    conf = {"spark.hadoop.fs.s3a.secret.key": "AKIA-very-secret", "spark.executor.cores": "2"}
    with pytest.raises(SecretValueError, match="fs.s3a.secret.key") as caught:
        stored.with_result("submit", {"spark_conf": conf})
    assert "AKIA" not in str(caught.value)
    with pytest.raises(SecretValueError):
        store.put_expansion_doc("exp-legacy", {"submit": {"spark_conf": conf}})
    assert store.get_expansion_doc("exp-legacy") is None
    redacted = {**conf, "spark.hadoop.fs.s3a.secret.key": "***"}
    kept = store.put_expansion(
        stored.with_result("submit", {"spark_conf": redacted}), expected_revision=1
    )
    assert make_store().get_expansion("exp-1").results == kept.results


def test_corrupt_expansion_record_is_named(make_store, store_kind):
    store = make_store()
    store.put_expansion(record(store.job_name), expected_revision=0)
    if store_kind == "kafka":
        key = encode_key("expansion", "exp-1", "vandal", revision=2)
        store.backend.io.produce([(key, b'{"status": "planned"}')])
        where = "offset"
    else:
        store.backend.files.replace(b'{"status": "planned"}', "expansions", "exp-1", "2.json")
        where = "2.json"
    with pytest.raises(CorruptCoordinatorRecordError, match=f"{where}.*misses field") as caught:
        make_store().get_expansion("exp-1")
    assert "fix or delete" in str(caught.value)


def test_the_store_keeps_the_status_machine(make_store):
    store = make_store()
    stored = store.put_expansion(record(store.job_name), expected_revision=0)
    jump = dataclasses.replace(stored, status=ExpansionStatus.COMPLETED)  # bypasses advance()
    with pytest.raises(InvalidTransitionError, match="'planned'.*'completed'"):
        store.put_expansion(jump, expected_revision=1)
    assert make_store().get_expansion("exp-1") == stored


def test_winners_tidy_older_revisions(make_store, store_kind):
    """The winner of each revision removes older ones (Kafka: tombstones, so compaction keeps
    one record per expansion; files: all but the current and the previous revision)."""
    store = make_store()
    current = store.put_expansion(record(store.job_name), expected_revision=0)
    for status in ("expanded", "barrier-snapshot", "barrier-passed"):
        current = store.put_expansion(current.advance(status), expected_revision=current.revision)
    reader = make_store()
    assert reader.get_expansion("exp-1") == current
    if store_kind == "kafka":
        assert list(reader.backend.log.chain("expansion", "exp-1").live.values()) == [4]
    else:
        assert reader.backend._revisions("expansions", "exp-1") == [3, 4]
