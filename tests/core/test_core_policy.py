"""Growth policy: validation at parse time and the factor it decides from live figures."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_samza_expand.core.errors import ExpansionError
from airflow_samza_expand.core.policy import (
    GrowthPolicy,
    InvalidPolicyError,
    TopicFigures,
    decide,
    factor_for_ratio,
)


def figures(**changes) -> TopicFigures:
    base = dict(
        topic="orders", partitions=4, largest_partition_bytes=1000, largest_partition=2,
        max_records_per_s_per_partition=10.0, busiest_partition=1, lag_records=0,
        lag_growth_records=0, window_s=10.0,
    )
    return TopicFigures(**{**base, **changes})


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({}, "no threshold"),
        ({"max_partition_bytes": -1}, "max_partition_bytes=-1 must be a positive"),
        ({"max_partition_bytes": 0}, "must be a positive"),
        ({"max_lag_records": 10, "lag_growing_for_s": -5}, "lag_growing_for_s=-5"),
        ({"lag_growing_for_s": 60, "max_partition_bytes": 1}, "needs max_lag_records"),
        ({"max_partition_bytes": 1, "max_factor": 3}, "max_factor=3 must be a power of two"),
        ({"max_partition_bytes": 1, "max_factor": 1}, "max_factor=1"),
        ({"max_partition_bytes": 1, "rate_window_s": 0}, "rate_window_s=0"),
    ],
)
def test_bad_policy_is_refused_with_the_fix(kwargs, words):
    with pytest.raises(InvalidPolicyError, match=words) as info:
        GrowthPolicy(**kwargs)
    assert isinstance(info.value, ExpansionError)  # a refusal: Airflow fails it, no retry


def test_unknown_setting_in_a_dict_is_refused():
    with pytest.raises(InvalidPolicyError, match="unknown setting.*max_bytes"):
        GrowthPolicy.from_dict({"max_bytes": 5})
    policy = GrowthPolicy(max_partition_bytes=5, max_factor=8)
    assert GrowthPolicy.from_dict(policy.to_dict()) == policy


def test_under_every_threshold_does_not_grow():
    policy = GrowthPolicy(
        max_partition_bytes=2000, max_records_per_s_per_partition=50, max_lag_records=100
    )
    decision = decide(policy, figures(lag_records=5))
    assert decision.factor == 1 and not decision.grow and decision.crossed == ()
    assert "no growth for orders" in decision.describe()
    assert "<= max_partition_bytes=2000" in decision.describe()


@pytest.mark.parametrize(
    ("size", "expected"), [(1001, 2), (2000, 2), (2001, 4), (4000, 4), (4001, 8)]
)
def test_size_over_threshold_grows_by_the_smallest_power_of_two_that_fits(size, expected):
    decision = decide(
        GrowthPolicy(max_partition_bytes=1000, max_factor=16),
        figures(largest_partition_bytes=size),
    )
    assert decision.factor == expected
    assert decision.crossed == ("max_partition_bytes",)
    assert size / decision.factor <= 1000 < size / (decision.factor // 2)
    assert f"holds {size} bytes" in decision.describe()


def test_factor_is_capped_by_max_factor_and_says_so():
    decision = decide(
        GrowthPolicy(max_records_per_s_per_partition=10, max_factor=4),
        figures(max_records_per_s_per_partition=1000.0),
    )
    assert decision.factor == 4 and decision.capped
    assert "capped at max_factor=4" in decision.describe()


def test_the_largest_need_wins_when_several_thresholds_cross():
    decision = decide(
        GrowthPolicy(max_partition_bytes=1000, max_records_per_s_per_partition=10, max_factor=16),
        figures(largest_partition_bytes=1500, max_records_per_s_per_partition=75.0),
    )
    assert decision.factor == 8
    assert set(decision.crossed) == {"max_partition_bytes", "max_records_per_s_per_partition"}


def test_lag_counts_only_while_growing_when_a_trend_is_asked():
    policy = GrowthPolicy(max_lag_records=100, lag_growing_for_s=30)
    steady = decide(policy, figures(lag_records=500, lag_growth_records=-20))
    assert steady.factor == 1 and "but not growing" in steady.describe()
    growing = decide(policy, figures(lag_records=500, lag_growth_records=40))
    assert growing.factor == 2 and growing.crossed == ("max_lag_records",)
    no_commits = decide(policy, figures(lag_records=None, lag_growth_records=None))
    assert no_commits.factor == 1 and "no committed offsets" in no_commits.describe()
    plain = decide(GrowthPolicy(max_lag_records=100), figures(lag_records=101))
    assert plain.factor == 2


@given(st.floats(min_value=0.0, max_value=1e9, allow_nan=False))
def test_factor_for_ratio_is_the_smallest_power_of_two_at_or_above(ratio):
    factor = factor_for_ratio(ratio)
    assert factor & (factor - 1) == 0
    assert ratio / factor <= 1 + 1e-9
    if factor > 1:
        assert ratio / (factor // 2) > 1


def test_decision_serializes_for_xcom():
    decision = decide(GrowthPolicy(max_partition_bytes=10), figures())
    doc = decision.to_dict()
    assert doc["factor"] == 4 and doc["capped"] and doc["grow"]  # needs x128, default cap 4
    assert doc["figures"]["topic"] == "orders" and doc["policy"]["max_partition_bytes"] == 10
