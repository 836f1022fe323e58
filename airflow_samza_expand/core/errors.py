"""Refusals of the expansion: every one is an `ExpansionError`, and no retry can fix it.

Messages name what is wrong (stream, counts, field) and how to fix it.
"""

from __future__ import annotations


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


__all__ = [
    "BarrierTimeoutError",
    "ConcurrentExpansionError",
    "CorruptCoordinatorRecordError",
    "ExpansionError",
    "InvalidGrowthError",
    "InvalidJobModelError",
    "PartitionerMismatchError",
    "UnknownTopicError",
]
