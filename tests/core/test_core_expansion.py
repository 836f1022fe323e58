"""Expansion algorithms, loading them by dotted path, and the growth validator."""

from __future__ import annotations

import pytest

from airflow_samza_expand.core.errors import ExpansionError, InvalidGrowthError
from airflow_samza_expand.core.expansion import (
    CONFIG_KEY,
    DEFAULT_ALGORITHM_PATH,
    DefaultPartitionExpansionAlgorithm,
    PartitionExpansionAlgorithm,
    load_expansion_algorithm,
    validate_growth,
)


class HalvingAlgorithm:
    """A custom algorithm for range-partitioned streams (loaded by dotted path below)."""

    def partition_before_expansion(self, p: int, current_count: int, initial_count: int) -> int:
        return p * initial_count // current_count


NOT_AN_ALGORITHM = object()


def test_default_algorithm_is_p_mod_initial():
    algorithm = DefaultPartitionExpansionAlgorithm()
    assert [algorithm.partition_before_expansion(p, 8, 2) for p in range(8)] == [0, 1] * 4
    assert algorithm.partition_before_expansion(5, 6, 3) == 2
    assert isinstance(algorithm, PartitionExpansionAlgorithm)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, 6, 4), "current partition count 6 is not a multiple of the initial count 4"),
        ((0, 2, 4), "current partition count 2 is not a multiple of the initial count 4"),
        ((8, 8, 4), "partition 8 is outside 0..7"),
        ((0, 0, 4), "partition counts must be positive"),
    ],
)
def test_default_algorithm_validates_counts(args, message):
    with pytest.raises(InvalidGrowthError, match=message):
        DefaultPartitionExpansionAlgorithm().partition_before_expansion(*args)


def test_config_key_is_samza_style():
    assert CONFIG_KEY == "job.systemstreampartition.expansion.algorithm"


def test_load_default_and_custom_algorithms():
    assert (
        type(load_expansion_algorithm(DEFAULT_ALGORITHM_PATH)) is DefaultPartitionExpansionAlgorithm
    )
    assert type(load_expansion_algorithm(None)) is DefaultPartitionExpansionAlgorithm
    custom = load_expansion_algorithm(f"{__name__}.HalvingAlgorithm")
    assert isinstance(custom, HalvingAlgorithm)
    assert custom.partition_before_expansion(3, 4, 2) == 1


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("no_such_module_xyz.Algorithm", "cannot import module 'no_such_module_xyz'"),
        (f"{__name__}.Missing", f"module '{__name__}' has no 'Missing'"),
        (f"{__name__}.NOT_AN_ALGORITHM", "has no partition_before_expansion method"),
        ("justaname", "is not a dotted path"),
    ],
)
def test_unknown_algorithm_paths_are_refused_with_the_config_key(path, message):
    with pytest.raises(ExpansionError) as info:
        load_expansion_algorithm(path)
    assert message in str(info.value)
    assert CONFIG_KEY in str(info.value)


@pytest.mark.parametrize(
    ("current", "target", "factor"), [(2, 4, 2), (2, 8, 4), (3, 6, 2), (1, 64, 64), (5, 40, 8)]
)
def test_power_of_two_growth_is_accepted(current, target, factor):
    assert validate_growth("orders", current, target) == factor


@pytest.mark.parametrize(
    ("current", "target", "fragments"),
    [
        (4, 2, ["'orders'", "cannot shrink from 4 to 2", "orders=8"]),
        (4, 4, ["'orders'", "target 4 equals the current count 4", "orders=8"]),
        (4, 6, ["'orders'", "6 is not a multiple of the current count 4", "orders=8"]),
        (4, 10, ["not a multiple of the current count 4", "orders=12 or orders=8"]),
        (2, 6, ["'orders'", "2 -> 6 grows by x3, not by a power of two", "orders=4 or orders=8"]),
        (3, 18, ["x6", "orders=12 or orders=24"]),
        (0, 4, ["current partition count must be a positive integer, got 0"]),
        (4, -8, ["target partition count must be a positive integer, got -8"]),
        (2, True, ["target partition count must be a positive integer"]),
    ],
)
def test_bad_growth_names_stream_counts_and_fix(current, target, fragments):
    with pytest.raises(InvalidGrowthError) as info:
        validate_growth("orders", current, target)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_any_multiple_when_allowed():
    assert validate_growth("orders", 2, 6, require_power_of_two=False) == 3
    with pytest.raises(InvalidGrowthError, match="not a multiple"):
        validate_growth("orders", 4, 6, require_power_of_two=False)
