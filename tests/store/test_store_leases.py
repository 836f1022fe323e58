"""Leases in both coordinator stores: the race, expiry, renewal, release and epoch fencing.

The clock of the lease rules is a settable fake (`clock`), so expiry needs no sleeping."""

from __future__ import annotations

import threading

import pytest
from store_fixtures import WriteGate, record

from airflow_samza_expand.core._clock import CLOCK_SKEW_S
from airflow_samza_expand.core.errors import LeaseHeldError, LeaseLostError
from airflow_samza_expand.store import ACTIVE_LEASE, EXPANSION_LEASE


@pytest.mark.parametrize("name", [EXPANSION_LEASE, ACTIVE_LEASE])
def test_n_contenders_exactly_one_holder(make_store, name):
    contenders = 5
    stores = [make_store() for _ in range(contenders)]
    gate = WriteGate(contenders)
    for store in stores:
        gate.gate(store)
    outcome: dict[int, object] = {}

    def contend(i):
        try:
            outcome[i] = stores[i].acquire_lease(name, f"airflow:dag/run-{i}", 30)
        except LeaseHeldError as exc:
            outcome[i] = exc

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(contenders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert gate.arrived == contenders  # every contender reached its write
    holders = [o for o in outcome.values() if not isinstance(o, LeaseHeldError)]
    refused = [o for o in outcome.values() if isinstance(o, LeaseHeldError)]
    assert len(holders) == 1 and len(refused) == contenders - 1, outcome
    winner = holders[0]
    assert winner.epoch == 1 and not winner.released
    assert all(exc.lease.holder == winner.holder for exc in refused)
    assert all(winner.holder in str(exc) for exc in refused)
    assert make_store().get_lease(name) == winner


def test_expiry_takeover_and_fencing(make_store, clock):
    a, b = make_store(), make_store()
    lease_a = a.acquire_lease(EXPANSION_LEASE, "airflow:dag/run-a", 10)
    assert a.acquire_lease(EXPANSION_LEASE, "airflow:dag/run-a", 10).epoch == 1  # renews
    stored = a.put_expansion(record(a.job_name), expected_revision=0, fence=lease_a)
    with pytest.raises(LeaseHeldError, match="run-a"):
        b.acquire_lease(EXPANSION_LEASE, "airflow:dag/run-b", 10)
    clock.advance(10 + CLOCK_SKEW_S / 2)  # past the ttl, within the skew margin: still held
    with pytest.raises(LeaseHeldError):
        b.acquire_lease(EXPANSION_LEASE, "airflow:dag/run-b", 10)
    clock.advance(CLOCK_SKEW_S)  # now expired: b takes it with a new epoch
    lease_b = b.acquire_lease(EXPANSION_LEASE, "airflow:dag/run-b", 10)
    assert lease_b.epoch == 2
    with pytest.raises(LeaseLostError, match="run-b"):
        a.renew_lease(lease_a)
    with pytest.raises(LeaseLostError):
        a.put_expansion(stored.advance("expanded"), expected_revision=1, fence=lease_a)
    a.release_lease(lease_a)  # no-op: a no longer holds it
    assert make_store().get_lease(EXPANSION_LEASE) == lease_b
    assert make_store().get_expansion("exp-1") == stored
    moved = b.put_expansion(stored.advance("expanded"), expected_revision=1, fence=lease_b)
    assert moved.revision == 2
    b.release_lease(lease_b)
    released = make_store().get_lease(EXPANSION_LEASE)
    assert released.released and released.epoch == 2
    with pytest.raises(LeaseLostError):
        b.put_expansion(moved.advance("barrier-passed"), expected_revision=2, fence=lease_b)
    assert a.acquire_lease(EXPANSION_LEASE, "airflow:dag/run-a", 10).epoch == 3


def test_renewal_keeps_the_lease_and_an_expired_untaken_lease(make_store, clock):
    store = make_store()
    lease = store.acquire_lease(ACTIVE_LEASE, "processor-1", 6)
    for _ in range(4):
        clock.advance(2)  # renew every ttl / 3
        lease = store.renew_lease(lease)
    assert lease.epoch == 1
    with pytest.raises(LeaseHeldError):
        make_store().acquire_lease(ACTIVE_LEASE, "processor-2", 6)
    clock.advance(60)  # expired, but nobody took it: the holder may still renew it
    assert store.renew_lease(lease).epoch == 1


def test_a_fenced_write_racing_a_takeover(make_store, clock, store_kind):
    """The old holder passed its checks and is at its write when another run takes the lease.

    Kafka decides by log order: the takeover came first, so the old holder's record is not
    accepted and it gets LeaseLostError. Files check the fence after the write too: the old
    holder gets LeaseLostError (its record may have landed; the new holder reads it)."""
    a, b = make_store(), make_store()
    lease_a = a.acquire_lease(EXPANSION_LEASE, "airflow:dag/run-a", 10)
    stored = a.put_expansion(record(a.job_name), expected_revision=0, fence=lease_a)
    clock.advance(60)
    taken: list[object] = []
    if store_kind == "kafka":
        target, name = a.backend.io, "produce"
    else:
        target, name = a.backend.files, "create_exclusive"
    original = getattr(target, name)

    def takeover_first(*args, **kwargs):
        if not taken:
            taken.append(b.acquire_lease(EXPANSION_LEASE, "airflow:dag/run-b", 10))
        return original(*args, **kwargs)

    setattr(target, name, takeover_first)
    with pytest.raises(LeaseLostError, match="epoch 1"):
        a.put_expansion(stored.advance("expanded"), expected_revision=1, fence=lease_a)
    assert taken and taken[0].epoch == 2
    current = make_store().get_expansion("exp-1")
    if store_kind == "kafka":
        assert current == stored  # the old holder's write did not count
    else:
        assert current.revision in (1, 2)
    moved = b.put_expansion(
        current.advance("expanded"), expected_revision=current.revision, fence=taken[0]
    )
    assert make_store().get_expansion("exp-1") == moved


def test_a_later_step_renews_with_the_ttl_the_plan_chose(make_store, clock):
    """The plan takes the expansion lease with the DAG's ``lease_ttl_s``; the later steps and
    waits renew it with ``take(store, holder)`` and keep that TTL (they used to reset it to the
    600 s default, so a short TTL lasted one step and a long one was cut to 600 s)."""
    from airflow_samza_expand._protocol.ownership import DEFAULT_LEASE_TTL_S, take

    store = make_store()
    holder = "airflow:dag/run-a"
    assert take(store, holder, 45).ttl_s == 45  # the plan
    assert take(store, holder).ttl_s == 45  # expand, barrier, stop, write ... renew it
    clock.advance(45 + 2 * CLOCK_SKEW_S)  # expired, nobody took it: the holder takes it back
    assert take(store, holder).ttl_s == 45
    assert take(store, holder, 90).ttl_s == 90  # an explicit TTL still wins
    held = store.get_lease(EXPANSION_LEASE)
    store.release_lease(held)
    fresh = take(make_store(), "airflow:dag/run-b")  # a new holder without a TTL: the default
    assert fresh.ttl_s == DEFAULT_LEASE_TTL_S and fresh.epoch == held.epoch + 1
