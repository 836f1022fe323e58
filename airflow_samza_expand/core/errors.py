"""Refusals of the expansion: every one is an `ExpansionError`, and no retry can fix it.

Messages name what is wrong (stream, counts, field) and how to fix it.

`ConflictError` and its subclasses are *not* refusals: another writer got there first (a
newer revision, a lease someone else holds). The caller re-reads and decides again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - typing only; core._record and core._lease import this module
    from airflow_samza_expand.core._lease import Lease
    from airflow_samza_expand.core._record import ExpansionRecord


class ExpansionError(Exception):
    """Base of every refusal: bad input or a state that a retry cannot fix."""


class InvalidGrowthError(ExpansionError):
    """A partition count that shrinks, is not a multiple, not a power-of-two growth, or <= 0."""


class InvalidJobModelError(ExpansionError):
    """A malformed job model document or SSP-to-task mapping."""


class UnknownTopicError(ExpansionError):
    """A stream that does not exist on the cluster."""


class PartitionerMismatchError(ExpansionError):
    """Sampled keyed records do not sit at `hash(key) % N` under either default partitioner."""


class ConcurrentExpansionError(ExpansionError):
    """Someone else wrote the job model since the plan was made."""


class CorruptCoordinatorRecordError(ExpansionError):
    """A coordinator-topic record that cannot be decoded."""


class BarrierTimeoutError(ExpansionError):
    """The job did not pass the barrier offsets before the timeout."""


class MaxPartitionsError(InvalidGrowthError):
    """A target partition count above the `max_partitions` setting (refused before any work)."""


class InvalidTransitionError(ExpansionError):
    """An expansion record asked to move to a status its current status does not allow."""


class SecretValueError(ExpansionError):
    """A value under a secret-looking key (password, token, ...) about to be persisted."""


class KafkaAuthenticationError(ExpansionError):
    """The brokers answered but refused the client's SASL/SSL credentials (no retry helps)."""


class KafkaAuthorizationError(ExpansionError):
    """The brokers refused an operation for lack of an ACL (names resource, operation,
    principal); no retry helps until an operator grants it."""


class ConflictError(Exception):
    """Someone else changed the record first: re-read it and decide again (not a refusal)."""


class StaleRevisionError(ConflictError):
    """A conditional update carried a revision that is no longer the current one."""

    def __init__(self, message: str, current: ExpansionRecord | None = None) -> None:
        super().__init__(message)
        self.current = current


class LeaseHeldError(ConflictError):
    """The lease is held by another holder and has not expired."""

    def __init__(self, message: str, lease: Lease) -> None:
        super().__init__(message)
        self.lease = lease


class LeaseLostError(ConflictError):
    """The caller's lease epoch is no longer current (released, expired and taken, or stolen)."""

    def __init__(self, message: str, lease: Lease | None = None) -> None:
        super().__init__(message)
        self.lease = lease


__all__ = [
    "BarrierTimeoutError",
    "ConcurrentExpansionError",
    "ConflictError",
    "CorruptCoordinatorRecordError",
    "ExpansionError",
    "InvalidGrowthError",
    "InvalidJobModelError",
    "InvalidTransitionError",
    "KafkaAuthenticationError",
    "KafkaAuthorizationError",
    "LeaseHeldError",
    "LeaseLostError",
    "MaxPartitionsError",
    "SecretValueError",
    "StaleRevisionError",
    "PartitionerMismatchError",
    "UnknownTopicError",
]
