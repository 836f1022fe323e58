"""Processor liveness: alive iff the heartbeat is younger than its TTL."""

from __future__ import annotations

from datetime import timedelta

from airflow_samza_expand.core._clock import to_iso, utc_now
from airflow_samza_expand.core._liveness import (
    DEFAULT_TTL_S,
    ProcessorStatus,
    acknowledging,
    blocking_stop,
    dead_processors,
    is_alive,
    job_consumer_group,
    standbys,
)

NOW = utc_now()


def beat(age_s: float, state: str = "running", version: int = 2, **extra) -> dict:
    return {
        "job_model_version": version,
        "state": state,
        "heartbeat_at": to_iso(NOW - timedelta(seconds=age_s)),
        **extra,
    }


def test_alive_iff_younger_than_ttl():
    assert is_alive(beat(5, ttl=10.0), NOW)
    assert not is_alive(beat(10.5, ttl=10.0), NOW)
    # no TTL recorded (written before heartbeats carried one): the default applies
    assert is_alive(beat(DEFAULT_TTL_S - 1), NOW)
    assert not is_alive(beat(DEFAULT_TTL_S + 1), NOW)
    assert not is_alive({"state": "running"}, NOW)
    assert not is_alive({"state": "running", "heartbeat_at": "yesterday"}, NOW)
    # a nonsense TTL falls back to the default rather than making a processor immortal
    assert not is_alive(beat(DEFAULT_TTL_S + 1, ttl=-1), NOW)


def test_dead_processor_is_never_acknowledged_and_never_blocks_a_stop():
    processors = {
        "live": beat(1, ttl=30.0, role="active"),
        "dead": beat(3600, ttl=30.0, role="active"),
        "legacy": beat(2),  # no role: counts when running
        "standby": beat(1, state="standby", role="standby"),
        "old-version": beat(1, version=1),
    }
    assert acknowledging(processors, 2, NOW) == ["legacy", "live"]
    assert sorted(blocking_stop(processors, 2, NOW)) == ["legacy", "live", "standby"]
    assert sorted(dead_processors(processors, NOW)) == ["dead"]
    assert standbys(processors, NOW) == ["standby"]


def test_final_states_are_not_dead():
    processors = {
        "stopped": beat(3600, state="stopped"),
        "failed": beat(3600, state="failed"),
        "silent-standby": beat(3600, state="standby", role="standby"),
    }
    assert sorted(dead_processors(processors, NOW)) == ["silent-standby"]
    assert blocking_stop(processors, 2, NOW) == {}


def test_status_describes_itself():
    status = ProcessorStatus.from_record("p-1", beat(12, ttl=30.0, role="standby"))
    text = status.describe(NOW)
    assert "p-1" in text and "standby" in text and "12 s ago" in text and "ttl 30 s" in text


def test_the_jobs_consumer_group_is_the_given_then_the_advertised_then_the_job_name():
    """The barrier, the growth policy and the job page read the group the job commits to."""
    assert job_consumer_group("orders", {}) == "orders"
    assert job_consumer_group("orders", {"p": beat(1)}) == "orders"  # an older runtime
    procs = {
        "old": beat(50, state="stopped", consumer_group="legacy-a"),
        "new": beat(1, consumer_group="legacy-b"),
    }
    assert job_consumer_group("orders", procs) == "legacy-b"  # the newest heartbeat
    assert job_consumer_group("orders", procs, "given") == "given"
    assert ProcessorStatus.from_record("p", beat(1, consumer_group="g")).consumer_group == "g"
    assert ProcessorStatus.from_record("p", beat(1, consumer_group="")).consumer_group is None


def test_the_advertised_group_is_the_newest_heartbeats_for_any_typed_rows():
    """One rule for the protocol (`ProcessorStatus`) and the job page (its own rows)."""
    from types import SimpleNamespace

    from airflow_samza_expand.core._liveness import advertised_group

    rows = [
        SimpleNamespace(heartbeat_at="2026-11-29T01:00:00Z", consumer_group="old"),
        SimpleNamespace(heartbeat_at="2026-11-29T02:00:00Z", consumer_group="new"),
        SimpleNamespace(heartbeat_at="2026-11-29T03:00:00Z", consumer_group=None),
    ]
    assert advertised_group(rows) == "new"
    assert advertised_group(rows[2:]) is None
