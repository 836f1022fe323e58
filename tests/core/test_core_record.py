"""The expansion record, its state machine, the clock and the lease rules (pure)."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta

import pytest

from airflow_samza_expand.core._clock import CLOCK_SKEW_S, age_s, now_iso, parse_iso, to_iso
from airflow_samza_expand.core._lease import decide_acquire, decide_release, decide_renew
from airflow_samza_expand.core._record import (
    TRANSITIONS,
    ExpansionRecord,
    ExpansionStatus,
)
from airflow_samza_expand.core._secrets import redact
from airflow_samza_expand.core.errors import (
    CorruptCoordinatorRecordError,
    InvalidTransitionError,
    LeaseHeldError,
    LeaseLostError,
    SecretValueError,
)

S = ExpansionStatus
T0 = datetime(2026, 11, 23, 12, 0, 0, 123456, tzinfo=UTC)


def record(**changes) -> ExpansionRecord:
    base = ExpansionRecord(
        "exp-1",
        "job",
        1,
        2,
        {"counts_after": {"orders": 4}},
        S.PLANNED,
        "cli:host/1",
        to_iso(T0),
        to_iso(T0),
    )
    return dataclasses.replace(base, **changes)


def test_clock_format_and_old_forms():
    assert to_iso(T0) == "2026-11-23T12:00:00.123Z"
    assert parse_iso("2026-11-23T12:00:00.123Z") == T0.replace(microsecond=123000)
    assert parse_iso("2026-11-23T12:00:00Z") == T0.replace(microsecond=0)  # the old format
    assert age_s("2026-11-23T12:00:00.123Z", T0 + timedelta(seconds=5)) == pytest.approx(
        5, abs=1e-3
    )
    assert parse_iso(now_iso()).tzinfo is not None
    with pytest.raises(ValueError, match="ISO-8601"):
        parse_iso("yesterday")


def test_every_status_has_transitions_and_the_happy_path_is_allowed():
    assert set(TRANSITIONS) == set(S)
    r = record()
    for status in [
        S.EXPANDED,
        S.BARRIER_SNAPSHOT,
        S.BARRIER_PASSED,
        S.JOB_STOPPED,
        S.JOB_MODEL_WRITTEN,
        S.SUBMITTED,
        S.COMPLETED,
    ]:
        r = r.advance(status)
        assert r.advance(status).status == status  # a rerun of the step is idempotent
    assert r.status == S.COMPLETED and TRANSITIONS[S.COMPLETED] == frozenset()


def test_forbidden_transitions_name_the_allowed_ones():
    with pytest.raises(InvalidTransitionError, match="'planned'.*'job-model-written'.*expanded"):
        record().advance(S.JOB_MODEL_WRITTEN)
    done = record(status=S.COMPLETED)
    with pytest.raises(InvalidTransitionError, match="final"):
        done.advance(S.FAILED)
    failed = record(status=S.BARRIER_SNAPSHOT).advance(S.FAILED)
    assert failed.advance(S.BARRIER_SNAPSHOT).status == S.BARRIER_SNAPSHOT  # resume
    with pytest.raises(InvalidTransitionError):
        failed.advance(S.PLANNED)


def test_round_trip_keeps_every_field():
    r = (
        record(barrier={"orders": {0: 10, 1: 12}}, stale_placements={"orders": {"records": 0}})
        .advance(S.EXPANDED)
        .with_step("expand", started_at=to_iso(T0), ended_at=to_iso(T0))
        .with_result("expand", {"orders": {"partitions": 4, "applied": True}})
    )
    back = ExpansionRecord.from_json(r.to_json())
    assert back == r and back.to_json() == r.to_json()
    assert back.barrier["orders"][1] == 12 and back.steps["expand"].ended_at == to_iso(T0)


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"status": "planned"}, "misses field 'base_version'"),
        ({"status": "done"}, "status"),
        ({"target_version": 7}, "target_version"),
        ({"created_at": "noon"}, "ISO-8601"),
        ({"format": 9}, "format 9"),
    ],
)
def test_a_corrupt_record_names_the_field(doc, field):
    good = json.loads(record().to_json())
    broken = {"status": "planned"} if "base_version" in field else {**good, **doc}
    with pytest.raises(CorruptCoordinatorRecordError, match=field):
        ExpansionRecord.from_dict(broken)
    with pytest.raises(CorruptCoordinatorRecordError, match="not JSON"):
        ExpansionRecord.from_json("{")


def test_secrets_are_refused_redacted_values_kept():
    conf = {"spark.hadoop.fs.s3a.secret.key": "s3cr3t", "spark.driver.memory": "1g"}
    with pytest.raises(SecretValueError, match="secret.key") as caught:
        record().with_result("submit", {"spark_conf": conf})
    assert "s3cr3t" not in str(caught.value)
    with pytest.raises(SecretValueError):
        record(plan={"kafka": {"sasl.password": "pw"}})
    kept = record().with_result("submit", {"spark_conf": redact(conf)})
    assert kept.results["submit"]["spark_conf"]["spark.driver.memory"] == "1g"


def test_lease_rules():
    L0 = T0.replace(microsecond=123000)  # representable in the millisecond format
    a = decide_acquire(None, "expansion", "run-a", 10, L0)
    assert (a.epoch, a.holder, a.released) == (1, "run-a", False)
    assert decide_acquire(a, "expansion", "run-a", 10, L0 + timedelta(seconds=5)).epoch == 1
    with pytest.raises(LeaseHeldError, match="run-a") as caught:
        decide_acquire(a, "expansion", "run-b", 10, L0 + timedelta(seconds=10 + CLOCK_SKEW_S))
    assert caught.value.lease == a
    late = L0 + timedelta(seconds=10 + CLOCK_SKEW_S + 0.01)
    b = decide_acquire(a, "expansion", "run-b", 10, late)
    assert (b.epoch, b.holder) == (2, "run-b")
    with pytest.raises(LeaseLostError, match="run-b"):
        decide_renew(b, a)
    assert decide_release(b, a) is None  # not the holder: no-op
    released = decide_release(b, b)
    assert released.released and released.epoch == 2
    assert decide_acquire(released, "expansion", "run-a", 10, late).epoch == 3
    with pytest.raises(ValueError, match="lease name"):
        decide_acquire(None, "other", "run-a", 10)
    with pytest.raises(ValueError, match="ttl_s"):
        decide_acquire(None, "active", "run-a", 0)


def test_a_record_is_a_plain_value():
    """Pickles and deep-copies (Airflow and Spark do both); shares nothing with the caller."""
    import copy
    import pickle

    results = {"expand": {"orders": {"partitions": 4}}}
    r = record(barrier={"orders": {0: 1}}).with_result("expand", results["expand"])
    results["expand"]["orders"]["partitions"] = 99
    assert r.results["expand"]["orders"]["partitions"] == 4
    assert pickle.loads(pickle.dumps(r)) == r == copy.deepcopy(r)


def test_an_update_copies_only_what_it_changes():
    """A change shares every part it does not touch with the record it came from (an update
    costs what it changes, not the record's size), and no part can be changed in place."""
    import copy
    import pickle

    samples = [{"total": n} for n in range(3)]
    r = record(barrier={"orders": {p: p for p in range(512)}}).with_result("lag", samples)
    r2 = r.with_result("expand", {"orders": {"partitions": 4}}).advance(S.EXPANDED)
    assert r2.plan is r.plan and r2.barrier is r.barrier and r2.steps is r.steps
    assert r2.results["lag"] is r.results["lag"] and r2.results["lag"] == samples
    r3 = r2.with_result("lag", [*r2.results["lag"], {"total": 3}])  # one sample more
    assert r3.results["lag"][0] is r.results["lag"][0] and len(r3.results["lag"]) == 4
    for change in (
        lambda: r.results.update(x=1),
        lambda: r.results["lag"].append({}),
        lambda: r.results["lag"][0].__setitem__("total", 9),
        lambda: r.plan.pop("counts_before"),
        lambda: r.barrier["orders"].clear(),
    ):
        with pytest.raises(TypeError, match="immutable"):
            change()
    plain = r.to_dict()
    plain["results"]["lag"].append({})  # a plain copy for the caller to change
    assert len(r.results["lag"]) == 3
    assert pickle.loads(pickle.dumps(r3)) == r3 == copy.deepcopy(r3)
    assert ExpansionRecord.from_json(r3.to_json()).to_json() == r3.to_json()
    with pytest.raises(SecretValueError, match="lag.token"):  # a new part beside frozen ones
        r3.with_result("lag", {"old": r3.results["lag"], "token": "t0k"})
