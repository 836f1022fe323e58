"""The job's *active lease* from Kafka's own group membership.

Why: docs/design.md 'Processors and the active lease'.

Kafka Connect elects its leader this way, and so do we: every processor of job ``<job>`` joins
the consumer group ``<job>.active`` subscribed to a single-partition *lease topic*
(``__samza_active_<job>``, created on first use). The member the broker's group protocol gives
partition 0 is the **active** processor; every other member is a **standby**.

* Lease expiry is the broker's session timeout (``ttl_s``): a member that stops heartbeating
  (killed, SIGSTOPped, partitioned) is removed by the broker and the partition moves on. A
  member whose process lives but stops polling for ``ttl_s`` leaves the group itself
  (``max.poll.interval.ms``).
* Fencing is the group generation: `ActiveLease.confirm` commits the lease partition's offset
  with the member's generation, which the broker refuses (``ILLEGAL_GENERATION`` /
  ``UNKNOWN_MEMBER_ID``) once the member was fenced, e.g. a zombie resumed after its session
  expired. The job confirms before it writes a batch and before it commits offsets.
* A refusal during a rebalance is not a verdict: while the group rebalances (a member joins or
  leaves, its leader syncs late) the broker answers ``REBALANCE_IN_PROGRESS``, or
  ``ILLEGAL_GENERATION`` to the generation the member had before it rejoined, yet the member
  still holds the partition - the cooperative protocol revokes a partition before it moves it.
  The confirm asks again until the rebalance's outcome: a successful commit (True), or the
  partition revoked or lost (False), for at most `CONFIRM_TTLS` TTLs. The commit is
  asynchronous: the polling thread never blocks, so a long rebalance never makes the member
  miss its own poll interval (a synchronous commit did: the member left the group).
* ``cooperative-sticky`` assignment keeps the partition with its holder when a standby joins
  or leaves (no needless handover); `ActiveLease.release` leaves the group at once, so a
  standby takes over after one rebalance instead of a session timeout (the handover).

It is a separate group from the job's offset group ``<job>`` on purpose: the job commits its
progress with ``assign()`` (generation -1), which Kafka refuses into a group that has members.

A background thread polls the consumer (heartbeats run inside librdkafka); the job reads
`is_active` / `epoch` and waits with `wait_until_active`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from airflow_samza_expand._kafka.admin import KafkaAdmin, without_consumer_settings
from airflow_samza_expand._kafka.clients import Consumer

log = logging.getLogger(__name__)

DEFAULT_LEASE_TTL_S = 30.0
POLL_S = 0.05  # also how fast confirm() is answered
# A standby learns that the active left at its next heartbeat (the answer says a rebalance is
# in progress), so a handover waits up to one heartbeat interval for the lease: keep it short
# (Kafka's default is 3 s; a member heartbeats a few times a second here, one tiny request).
HEARTBEAT_MAX_MS = 250
LEASE_PARTITION = 0
# A confirm waits at most this many TTLs for the group's answer: a rebalance lasts at most the
# rebalance timeout (max.poll.interval.ms = the TTL) per round, and a member that fails to rejoin
# or sync is removed after its session timeout (the TTL) and starts one more round.
CONFIRM_TTLS = 3.0
CONFIRM_RETRY_S = 0.2  # between commits that got no verdict


# a lease commit failing with these says nothing final about the lease: a rebalance (the
# member's generation moves on while it keeps the partition), or the group coordinator moving or
# loading (a broker restart) - the confirm asks again until the group's outcome, within
# CONFIRM_TTLS TTLs; a member that was fenced learns it from librdkafka (the partition lost)
TRANSIENT_CONFIRM_ERRORS = frozenset({
    KafkaError.REBALANCE_IN_PROGRESS,
    KafkaError.ILLEGAL_GENERATION,
    KafkaError.UNKNOWN_MEMBER_ID,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._WAIT_COORD,
})  # fmt: skip


def heartbeat_interval_ms(ttl_s: float) -> int:
    """A tenth of the session timeout, between 100 and `HEARTBEAT_MAX_MS` milliseconds."""
    return max(100, min(HEARTBEAT_MAX_MS, int(ttl_s * 1000 / 10)))


def lease_topic(job_name: str) -> str:
    """The single-partition topic whose one partition is the job's active lease."""
    return f"__samza_active_{job_name}"


def lease_group(job_name: str) -> str:
    """The consumer group of the job's processors (not the job's offset group)."""
    return f"{job_name}.active"


class ActiveLease:
    """One processor's membership in the job's lease group (see the module docstring).

    ``on_change(active, epoch)`` is called from the polling thread on every change of role.
    """

    def __init__(
        self,
        kafka_config: Mapping[str, str],
        job_name: str,
        member: str,
        *,
        ttl_s: float = DEFAULT_LEASE_TTL_S,
        topic: str | None = None,
        on_change: Callable[[bool, int], None] | None = None,
    ) -> None:
        if ttl_s < 1:
            raise ValueError(f"lease ttl_s must be >= 1 s, got {ttl_s!r}")
        self.config = dict(kafka_config)
        self.job_name = job_name
        self.member = member
        self.ttl_s = float(ttl_s)
        self.topic = topic or lease_topic(job_name)
        self.group = lease_group(job_name)
        self.on_change = on_change
        self._consumer: Consumer | None = None
        self._thread: threading.Thread | None = None
        self._closing = threading.Event()
        self._paused = threading.Event()  # tests: simulate a member that stops polling
        self._changed = threading.Condition()
        self._active = False
        self._epoch = 0  # +1 at every assignment of the lease to this member
        self._error: str | None = None
        # confirm() runs its commit in the polling thread (one thread drives the consumer),
        # asynchronously: the answer comes to `_on_commit` inside a poll
        self._confirm_lock = threading.Lock()
        self._confirm_request = threading.Event()
        self._confirm_done = threading.Event()
        self._confirm_ok = False
        self._confirm_seq = 0  # the confirm being asked; an answer to an older one is dropped
        self._in_flight: int | None = None  # the confirm whose commit awaits its answer
        self._retry_at = 0.0
        self._waiting_logged = False

    def __repr__(self) -> str:
        role = "active" if self._active else "standby"
        return f"ActiveLease({self.group!r}, member={self.member!r}, {role}, epoch={self._epoch})"

    # -- membership ----------------------------------------------------------------------------

    def join(self, *, timeout_s: float = 30.0) -> ActiveLease:
        """Create the lease topic if needed, join the group and start polling."""
        if self._consumer is not None:
            return self
        admin = KafkaAdmin(without_consumer_settings(self.config), timeout_s=timeout_s)
        try:
            admin.ensure_topic(self.topic, 1)
        finally:
            admin.close()
        ms = str(int(self.ttl_s * 1000))
        config = dict(self.config)
        config.update(
            {
                "group.id": self.group,
                "client.id": f"{self.group}:{self.member}",
                "enable.auto.commit": "false",
                "auto.offset.reset": "latest",
                "session.timeout.ms": ms,
                "max.poll.interval.ms": ms,
                "heartbeat.interval.ms": str(heartbeat_interval_ms(self.ttl_s)),
                "partition.assignment.strategy": "cooperative-sticky",
                "fetch.wait.max.ms": "100",
                "on_commit": self._on_commit,
            }
        )
        self._consumer = Consumer(config)
        self._consumer.subscribe(
            [self.topic], on_assign=self._on_assign, on_revoke=self._on_lose, on_lost=self._on_lose
        )
        self._thread = threading.Thread(target=self._loop, name=f"lease-{self.member}", daemon=True)
        self._thread.start()
        log.info(
            "processor %s joined lease group %s (topic %s, ttl %g s): waiting for a role",
            self.member,
            self.group,
            self.topic,
            self.ttl_s,
        )
        return self

    def _loop(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        while not self._closing.is_set():
            if self._paused.is_set():
                time.sleep(POLL_S)
                continue
            if self._confirm_request.is_set():
                self._ask_broker(consumer)
            try:
                consumer.poll(POLL_S)  # serves rebalance callbacks; the topic carries no data
            except Exception as exc:  # noqa: BLE001 - keep the membership thread alive
                self._error = str(exc)
                log.warning("lease group %s: poll failed: %s", self.group, exc)
                time.sleep(POLL_S)

    def _set(self, active: bool) -> None:
        with self._changed:
            if active == self._active:
                return
            self._active = active
            if active:
                self._epoch += 1
            epoch = self._epoch
            self._changed.notify_all()
        log.info(
            "processor %s is now %s of job %s (lease epoch %d)",
            self.member,
            "ACTIVE" if active else "standby",
            self.job_name,
            epoch,
        )
        if self.on_change is not None:
            self.on_change(active, epoch)

    def _on_assign(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        if any(p.partition == LEASE_PARTITION for p in partitions):
            self._set(True)

    def _on_lose(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        if any(p.partition == LEASE_PARTITION for p in partitions):
            self._set(False)

    # -- queries -------------------------------------------------------------------------------

    def is_active(self) -> bool:
        """This member's view: it holds the lease (confirm() asks the broker)."""
        return self._active

    @property
    def epoch(self) -> int:
        """How many times this member got the lease; a change means it was lost meanwhile."""
        return self._epoch

    def wait_until_active(
        self, timeout_s: float | None = None, stop: threading.Event | None = None
    ) -> bool:
        """Block until this member holds the lease (True), ``timeout_s`` passes or ``stop``."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._changed:
            while not self._active:
                if stop is not None and stop.is_set():
                    return False
                left = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
                if left <= 0:
                    return False
                self._changed.wait(left)
            return True

    def confirm(self, epoch: int | None = None) -> bool:
        """True if the broker confirms this member still holds the lease (at ``epoch``).

        Commits the lease partition's offset with the member's current generation: a fenced
        member (session expired, rebalanced away) gets an error from the broker and, from
        librdkafka, the partition lost. During a rebalance it waits for the outcome (see the
        module docstring), at most `CONFIRM_TTLS` TTLs.
        """
        if not self._active or (epoch is not None and epoch != self._epoch):
            return False
        if self._consumer is None or self._thread is None:
            return False
        with self._confirm_lock:
            self._confirm_done.clear()
            self._confirm_seq += 1
            self._confirm_request.set()
            # a paused polling thread (a hung driver) is not confirmed
            if not self._confirm_done.wait(self.ttl_s * CONFIRM_TTLS):
                self._confirm_request.clear()
                log.warning(
                    "processor %s: no answer about the lease of job %s within %g s",
                    self.member,
                    self.job_name,
                    self.ttl_s * CONFIRM_TTLS,
                )
                return False
            if not self._confirm_ok:
                return False
        return self._active and (epoch is None or epoch == self._epoch)

    def _ask_broker(self, consumer: Consumer) -> None:
        """In the polling thread: answer the confirm False once the partition is gone, else
        commit the lease partition (asynchronously) unless a commit awaits its answer."""
        if not self._active:
            self._answer(False)
        elif self._in_flight is None and time.monotonic() >= self._retry_at:
            self._in_flight = self._confirm_seq
            try:
                consumer.commit(
                    offsets=[TopicPartition(self.topic, LEASE_PARTITION, 0)], asynchronous=True
                )
            except KafkaException as exc:  # refused before it was sent
                self._on_commit(exc.args[0] if exc.args else None, [])

    def _on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """librdkafka's answer to a lease commit (called inside a poll of the polling thread)."""
        seq, self._in_flight = self._in_flight, None
        if error is None:
            error = next((p.error for p in partitions or [] if p.error is not None), None)
        if seq is None or seq != self._confirm_seq or not self._confirm_request.is_set():
            return  # the answer to a confirm that gave up waiting
        if error is None:
            if self._waiting_logged:
                log.info("processor %s: the broker confirmed the lease again", self.member)
            self._answer(self._active)
        elif error.code() in TRANSIENT_CONFIRM_ERRORS:
            if not self._waiting_logged:
                log.info(
                    "processor %s: the lease of job %s cannot be confirmed yet (%s): the group "
                    "is rebalancing or its coordinator moving; asking again until it settles",
                    self.member,
                    self.job_name,
                    error.name(),
                )
                self._waiting_logged = True
            self._retry_at = time.monotonic() + CONFIRM_RETRY_S
        else:
            log.warning(
                "processor %s: the broker refused the lease of job %s (%s)",
                self.member,
                self.job_name,
                error.str(),
            )
            self._answer(False)

    def _answer(self, ok: bool) -> None:
        self._waiting_logged = False
        self._confirm_request.clear()
        self._confirm_ok = ok
        self._confirm_done.set()

    # -- leaving -------------------------------------------------------------------------------

    def release(self) -> None:
        """Leave the group now (a standby takes the lease after one rebalance)."""
        self.close()

    def close(self) -> None:
        """Stop polling and leave the group (idempotent)."""
        self._closing.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.close()  # LeaveGroup: the broker rebalances at once
            except Exception as exc:  # noqa: BLE001 - closing anyway
                log.warning("lease group %s: close failed: %s", self.group, exc)
        self._set(False)

    # -- tests ---------------------------------------------------------------------------------

    def pause_polling(self) -> None:
        """Stop serving the consumer (as a hung driver would); librdkafka still heartbeats."""
        self._paused.set()

    def resume_polling(self) -> None:
        self._paused.clear()


__all__ = ["DEFAULT_LEASE_TTL_S", "ActiveLease", "lease_group", "lease_topic"]
