"""The job's active lease over Kafka group membership, on a real broker."""

from __future__ import annotations

import time

import pytest

from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand._kafka.membership import ActiveLease

TTL_S = 6.0  # Kafka's group.min.session.timeout.ms is 6 s
WAIT_S = 60.0


@pytest.fixture
def leases(kafka_bootstrap, unique_topic):
    """Factory of members of one job's lease group; all closed at the end."""
    job = unique_topic("lease-job")
    made: list[ActiveLease] = []

    def make(member: str, ttl_s: float = TTL_S) -> ActiveLease:
        lease = ActiveLease(client_config(kafka_bootstrap), job, member, ttl_s=ttl_s)
        made.append(lease.join())
        return lease

    yield make
    for lease in made:
        lease.close()


def wait_for(condition, what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def exactly_one_active(*members: ActiveLease) -> ActiveLease:
    wait_for(lambda: sum(m.is_active() for m in members) == 1, "exactly one active member")
    (active,) = [m for m in members if m.is_active()]
    return active


def test_two_members_exactly_one_active_and_it_is_confirmed(leases):
    a, b = leases("a"), leases("b")
    active = exactly_one_active(a, b)
    standby = b if active is a else a
    assert active.confirm()
    assert not standby.confirm()
    # a member joining later does not take the lease from its holder (sticky)
    c = leases("c")
    assert not c.wait_until_active(timeout_s=2 * TTL_S)
    assert active.confirm() and exactly_one_active(a, b, c) is active


def test_release_hands_the_lease_to_the_standby(leases):
    a, b = leases("a"), leases("b")
    active = exactly_one_active(a, b)
    standby = b if active is a else a
    epoch = active.epoch
    active.release()
    assert not active.is_active() and not active.confirm(epoch)
    assert standby.wait_until_active(timeout_s=WAIT_S)
    assert standby.confirm()


def test_member_that_stops_polling_loses_the_lease_and_is_fenced(leases):
    a, b = leases("a"), leases("b")
    active = exactly_one_active(a, b)
    standby = b if active is a else a
    epoch = active.epoch
    active.pause_polling()  # a hung driver: librdkafka leaves after max.poll.interval (= ttl)
    assert standby.wait_until_active(timeout_s=WAIT_S)
    active.resume_polling()
    assert not active.confirm(epoch)  # the broker refuses the old generation
    wait_for(lambda: not active.is_active(), "the paused member to see it is standby")
    assert standby.confirm()


def test_wait_until_active_honours_timeout_and_stop(leases):
    import threading

    a = leases("a")
    assert a.wait_until_active(timeout_s=WAIT_S)
    b = leases("b")
    stop = threading.Event()
    stop.set()
    assert not b.wait_until_active(stop=stop)
    assert not b.wait_until_active(timeout_s=0.5)


def test_bad_ttl_is_refused(kafka_bootstrap):
    with pytest.raises(ValueError, match="ttl_s"):
        ActiveLease(client_config(kafka_bootstrap), "job", "m", ttl_s=0.1)


def test_a_standby_heartbeats_often_enough_to_take_a_released_lease_at_once():
    """A standby hears of the active's LeaveGroup only in its next heartbeat's answer: with
    Kafka's default (3 s, a tenth of the 30 s TTL) a handover waited up to 3 s for the lease."""
    from airflow_samza_expand._kafka.membership import HEARTBEAT_MAX_MS, heartbeat_interval_ms

    assert heartbeat_interval_ms(30.0) == heartbeat_interval_ms(600.0) == HEARTBEAT_MAX_MS <= 250
    assert heartbeat_interval_ms(1.0) == 100  # never below 100 ms


def test_the_holder_confirms_through_a_rebalance_longer_than_its_ttl_and_not_after_losing_it(
    kafka_bootstrap, unique_topic
):
    """A rebalance (a member joining or leaving) can outlast the lease's TTL: the group's leader
    syncs late, and meanwhile the broker answers the holder's commit REBALANCE_IN_PROGRESS (or
    ILLEGAL_GENERATION, with the generation it had before it rejoined). The holder still owns the
    partition (the cooperative protocol revokes before it moves one): its confirm waits for the
    rebalance's outcome. A CI run lost its healthy active this way when a resumed zombie
    rejoined and left the group. If the outcome takes the partition away, the confirm is False."""
    import threading

    from raw_lease_leader import RawLeaseLeader

    from airflow_samza_expand._kafka.admin import KafkaAdmin
    from airflow_samza_expand._kafka.membership import lease_group, lease_topic

    job = unique_topic("lease-job")
    admin = KafkaAdmin(client_config(kafka_bootstrap))
    try:
        admin.ensure_topic(lease_topic(job), 1)
    finally:
        admin.close()
    leader = RawLeaseLeader(kafka_bootstrap, lease_group(job), lease_topic(job))
    leader.join()
    leader.sync(None)
    holder = ActiveLease(client_config(kafka_bootstrap), job, "holder", ttl_s=TTL_S)
    try:
        holder.join()
        leader.wait_for_rebalance()
        leader.join()
        leader.sync(leader.other())
        assert holder.wait_until_active(timeout_s=WAIT_S)
        epoch = holder.epoch
        assert holder.confirm(epoch)

        def confirm_while_the_leader_rebalances(sync_after_s: float, lease_to: str | None):
            leader.join()  # the leader's JoinGroup starts a rebalance; returns once all rejoined
            answer: list[bool] = []
            thread = threading.Thread(target=lambda: answer.append(holder.confirm(epoch)))
            thread.start()
            time.sleep(sync_after_s)  # the slow leader: the group stays CompletingRebalance
            leader.sync(lease_to)
            thread.join(WAIT_S)
            return answer

        # longer than the TTL, and the holder keeps the partition
        assert confirm_while_the_leader_rebalances(2 * TTL_S, leader.other()) == [True]
        assert holder.is_active() and holder.epoch == epoch
        # the rebalance's outcome takes the partition away: never confirmed after that
        assert confirm_while_the_leader_rebalances(1.0, None) == [False]
        wait_for(lambda: not holder.is_active(), "the holder to see it lost the lease")
        assert not holder.confirm(epoch)
    finally:
        holder.close()
