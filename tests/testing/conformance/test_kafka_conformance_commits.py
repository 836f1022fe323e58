"""Offset commits per group state, and idempotent produce retries (conformance, raw requests).

Kafka's classic group coordinator (ClassicGroup.validateOffsetCommit): a member of the current
generation may commit while the group is PreparingRebalance (clients commit on revocation
then); only CompletingRebalance refuses with REBALANCE_IN_PROGRESS. A commit without member id
and generation (-1: an assign() consumer, the AdminClient) is a simple commit: accepted while
the group is Empty (or unknown), refused with UNKNOWN_MEMBER_ID while it has members.
"""

from __future__ import annotations

import threading

import pytest
from kafka_conformance_raw import (
    ILLEGAL_GENERATION,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    RawMember,
    commit,
    committed,
    init_producer_id,
    log_end_offset,
    produce,
    record_batch,
    wait_for_code,
)


@pytest.fixture
def stable_member(kafka_bootstrap, create_topic, unique_topic):
    """(topic, group, member): a one-member group, Stable at generation 1; leaves at the end."""
    topic, group = create_topic(1), unique_topic("grp")
    member = RawMember(kafka_bootstrap, group)
    assert member.join() == NONE
    assert member.sync([member.member_id]) == NONE
    yield topic, group, member
    member.leave()


def _second_member_joins(bootstrap: str, group: str) -> tuple[RawMember, threading.Thread]:
    """Start a second member's JoinGroup (it blocks until the rebalance completes)."""
    other = RawMember(bootstrap, group)
    thread = threading.Thread(target=other.join, daemon=True)
    thread.start()
    return other, thread


def test_current_member_commits_while_preparing_rebalance(kafka_bootstrap, stable_member):
    topic, group, member = stable_member
    assert commit(kafka_bootstrap, group, topic, 5, generation=1, member_id=member.member_id) == 0
    other, thread = _second_member_joins(kafka_bootstrap, group)
    wait_for_code("the group to start rebalancing", member.heartbeat, REBALANCE_IN_PROGRESS)
    # PreparingRebalance: the member has not rejoined yet and still holds generation 1.
    code = commit(kafka_bootstrap, group, topic, 7, generation=1, member_id=member.member_id)
    assert code == NONE, f"commit on revocation refused with error {code}"
    assert committed(kafka_bootstrap, group, topic) == 7
    member.join()
    thread.join(30)
    other.leave()


def test_commit_refused_while_completing_rebalance_and_from_an_old_generation(
    kafka_bootstrap, stable_member
):
    topic, group, member = stable_member
    other, thread = _second_member_joins(kafka_bootstrap, group)
    wait_for_code("the group to start rebalancing", member.heartbeat, REBALANCE_IN_PROGRESS)
    assert member.join() == NONE  # both joined: generation 2, CompletingRebalance until sync
    thread.join(30)
    assert member.generation == other.generation == 2
    mid = member.member_id
    assert commit(kafka_bootstrap, group, topic, 3, generation=2, member_id=mid) == (
        REBALANCE_IN_PROGRESS
    )
    assert commit(kafka_bootstrap, group, topic, 3, generation=1, member_id=mid) == (
        ILLEGAL_GENERATION
    )
    leader, follower = (member, other) if member.leader == mid else (other, member)
    assert leader.sync([member.member_id, other.member_id]) == NONE
    assert follower.sync([]) == NONE
    assert commit(kafka_bootstrap, group, topic, 3, generation=2, member_id=mid) == NONE
    assert committed(kafka_bootstrap, group, topic) == 3
    other.leave()


def test_simple_commit_refused_while_the_group_has_members(kafka_bootstrap, stable_member):
    topic, group, member = stable_member
    code = commit(kafka_bootstrap, group, topic, 9)  # generation -1, no member id
    assert code == UNKNOWN_MEMBER_ID, f"simple commit into an active group answered {code}"
    assert committed(kafka_bootstrap, group, topic) == -1
    assert commit(kafka_bootstrap, group, topic, 9, generation=1, member_id="stranger") == (
        UNKNOWN_MEMBER_ID
    )
    assert member.leave() == NONE
    wait_for_code("a simple commit into the empty group",
                  lambda: commit(kafka_bootstrap, group, topic, 9), NONE)  # fmt: skip
    assert committed(kafka_bootstrap, group, topic) == 9


def test_simple_commit_into_an_unknown_group_is_accepted(
    kafka_bootstrap, create_topic, unique_topic
):
    topic, group = create_topic(1), unique_topic("simple")
    assert commit(kafka_bootstrap, group, topic, 4) == NONE
    assert committed(kafka_bootstrap, group, topic) == 4


def test_idempotent_retry_of_an_appended_batch_returns_the_original_offset(
    kafka_bootstrap, create_topic
):
    """A producer whose request timed out after the append resends the same batch (same producer
    id, epoch, sequence): Kafka answers with the first append's offset and appends nothing."""
    topic = create_topic(1)
    pid, epoch = init_producer_id(kafka_bootstrap)
    first = record_batch([b"a%d" % i for i in range(10)], pid, epoch, 0)
    assert produce(kafka_bootstrap, topic, first) == (NONE, 0)
    second = record_batch([b"b%d" % i for i in range(5)], pid, epoch, 10)
    assert produce(kafka_bootstrap, topic, second) == (NONE, 10)
    assert produce(kafka_bootstrap, topic, second) == (NONE, 10)  # the retry
    assert produce(kafka_bootstrap, topic, first) == (NONE, 0)  # an older one, still cached
    assert log_end_offset(kafka_bootstrap, topic) == 15
    third = record_batch([b"c"], pid, epoch, 15)
    assert produce(kafka_bootstrap, topic, third) == (NONE, 15)
    assert log_end_offset(kafka_bootstrap, topic) == 16


def test_a_follower_rejoining_while_completing_rebalance_keeps_the_generation(
    kafka_bootstrap, stable_member
):
    """ClassicGroup: a known member's JoinGroup with unchanged metadata while the group is
    CompletingRebalance (it missed its answer; librdkafka rejoins when its SyncGroup times out
    while the leader is slow) gets the current generation back, and starts no new rebalance."""
    topic, group, member = stable_member
    other, thread = _second_member_joins(kafka_bootstrap, group)
    wait_for_code("the group to start rebalancing", member.heartbeat, REBALANCE_IN_PROGRESS)
    assert member.join() == NONE
    thread.join(30)
    leader, follower = (member, other) if member.leader == member.member_id else (other, member)
    generation = follower.generation
    assert follower.join() == NONE  # answered at once: no rebalance waits for the leader
    assert follower.generation == generation
    assert leader.sync([member.member_id, other.member_id]) == NONE
    assert follower.sync([]) == NONE
    assert commit(kafka_bootstrap, group, topic, 4, generation=generation,
                  member_id=follower.member_id) == NONE  # fmt: skip
    other.leave()
