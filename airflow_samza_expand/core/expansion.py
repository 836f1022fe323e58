"""SEP-5 partition expansion algorithms and the growth validator.

An algorithm answers: partition ``p`` of a stream that now has ``current_count`` partitions
holds keys that, when the stream had ``initial_count`` partitions, lived in which partition?
The fixed-task groupers put ``p`` in the task that owned that partition.
"""

from __future__ import annotations

import importlib
from typing import Protocol, runtime_checkable

from airflow_samza_expand.core.errors import ExpansionError, InvalidGrowthError

CONFIG_KEY = "job.systemstreampartition.expansion.algorithm"
DEFAULT_ALGORITHM_PATH = "airflow_samza_expand.core.expansion.DefaultPartitionExpansionAlgorithm"


@runtime_checkable
class PartitionExpansionAlgorithm(Protocol):
    """SEP-5's ``PartitionExpansionAlgorithm``."""

    def partition_before_expansion(self, p: int, current_count: int, initial_count: int) -> int:
        """Partition (``0 <= result < initial_count``) whose keys now include partition ``p``."""
        ...


class DefaultPartitionExpansionAlgorithm:
    """``p % initial_count``: right for ``hash(key) % N`` partitioners and multiple-growth."""

    def partition_before_expansion(self, p: int, current_count: int, initial_count: int) -> int:
        if initial_count <= 0 or current_count <= 0:
            raise InvalidGrowthError(
                f"partition counts must be positive, got current {current_count} and initial "
                f"{initial_count} - fix the job model's stream counts"
            )
        if current_count < initial_count or current_count % initial_count:
            raise InvalidGrowthError(
                f"current partition count {current_count} is not a multiple of the initial count "
                f"{initial_count}: keys cannot be traced back - grow only by multiples"
            )
        if not 0 <= p < current_count:
            raise InvalidGrowthError(
                f"partition {p} is outside 0..{current_count - 1} of a {current_count}-partition "
                "stream - pass partitions of the current layout"
            )
        return p % initial_count

    def __repr__(self) -> str:
        return "DefaultPartitionExpansionAlgorithm()"


def algorithm_path(algorithm: object) -> str:
    """Dotted path of an algorithm instance's class, as stored in the job model."""
    cls = type(algorithm)
    return f"{cls.__module__}.{cls.__qualname__}"


def load_expansion_algorithm(dotted_path: str | None = None) -> PartitionExpansionAlgorithm:
    """Instantiate the algorithm class (or call the factory) named by a dotted path.

    ``None`` or ``""`` gives the default. This is the value of config key `CONFIG_KEY`.
    """
    if not dotted_path:
        return DefaultPartitionExpansionAlgorithm()
    module_name, _, attr = dotted_path.rpartition(".")
    hint = (
        f"set {CONFIG_KEY} to 'package.module.ClassName' of a class with "
        "partition_before_expansion(p, current_count, initial_count), e.g. "
        f"'{DEFAULT_ALGORITHM_PATH}'"
    )
    if not module_name or not attr:
        raise ExpansionError(f"expansion algorithm {dotted_path!r} is not a dotted path - {hint}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ExpansionError(
            f"expansion algorithm {dotted_path!r}: cannot import module {module_name!r} ({exc})"
            f" - {hint}"
        ) from None
    target = getattr(module, attr, None)
    if target is None:
        raise ExpansionError(
            f"expansion algorithm {dotted_path!r}: module {module_name!r} has no {attr!r} - {hint}"
        )
    instance = target() if callable(target) else target
    if not isinstance(instance, PartitionExpansionAlgorithm):
        raise ExpansionError(
            f"expansion algorithm {dotted_path!r} has no partition_before_expansion method - {hint}"
        )
    return instance


def is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def validate_growth(
    stream: str, current: int, target: int, *, require_power_of_two: bool = True
) -> int:
    """Check ``current -> target`` and return the growth factor ``target // current``.

    The target must be ``current * 2**k`` with ``k >= 1`` (or any multiple ``>= 2`` when
    ``require_power_of_two=False``). Raises `InvalidGrowthError` naming stream, counts and fix.
    """
    for name, value in (("current", current), ("target", target)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise InvalidGrowthError(
                f"stream '{stream}': {name} partition count must be a positive integer, got "
                f"{value!r} - give a count like {stream}=8"
            )
    suggestion = current * 2
    if target < current:
        raise InvalidGrowthError(
            f"stream '{stream}': cannot shrink from {current} to {target} partitions (Kafka "
            f"cannot remove partitions and the task mapping would break) - choose a target >= "
            f"{suggestion}, e.g. {stream}={suggestion}"
        )
    if target == current:
        raise InvalidGrowthError(
            f"stream '{stream}': target {target} equals the current count {current}, nothing "
            f"to expand - choose a target of current x 2^k, e.g. {stream}={suggestion}"
        )
    if target % current:
        lower, upper = current * (target // current), current * (target // current + 1)
        raise InvalidGrowthError(
            f"stream '{stream}': target {target} is not a multiple of the current count "
            f"{current}, so keys would not stay in their task - choose {stream}={upper}"
            + (f" or {stream}={lower}" if lower > current else "")
        )
    factor = target // current
    if require_power_of_two and not is_power_of_two(factor):
        below = current * (1 << (factor.bit_length() - 1))
        above = below * 2
        raise InvalidGrowthError(
            f"stream '{stream}': {current} -> {target} grows by x{factor}, not by a power of two "
            f"as SEP-5 requires - choose {stream}={below} or {stream}={above} (or explicitly "
            "allow any multiple)"
        )
    return factor


__all__ = [
    "CONFIG_KEY",
    "DEFAULT_ALGORITHM_PATH",
    "DefaultPartitionExpansionAlgorithm",
    "PartitionExpansionAlgorithm",
    "algorithm_path",
    "is_power_of_two",
    "load_expansion_algorithm",
    "validate_growth",
]
