"""Growth policy: grow a topic when a live figure crosses a threshold, not on a calendar.

SEP-5's motivation is a condition ("limit the maximum size of each partition", "increase
throughput of the consumer"). A `GrowthPolicy` names thresholds; `decide` compares them with the
`TopicFigures` measured on the cluster and returns the factor to apply (1 = leave the topic
alone): the smallest power of two that brings every crossed figure back under its threshold,
capped by ``max_factor``. Pure: the figures are measured by `_kafka.figures`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_samza_expand.core.errors import ExpansionError


class InvalidPolicyError(ExpansionError):
    """A growth policy that cannot be evaluated (no threshold, negative, bad factor)."""


def _is_power_of_two(value: int) -> bool:
    return value >= 1 and value & (value - 1) == 0


@dataclass(frozen=True)
class GrowthPolicy:
    """Thresholds that trigger a growth; ``None`` switches a threshold off.

    * ``max_partition_bytes``: the largest partition's size (bytes).
    * ``max_records_per_s_per_partition``: the produce rate of the busiest partition, from
      high-watermark deltas over ``rate_window_s``.
    * ``max_lag_records``: the job's total lag (records); with ``lag_growing_for_s`` it counts
      only when the lag also grew over a window of that many seconds.
    * ``max_factor``: the largest factor one run may apply (a power of two >= 2).
    """

    max_partition_bytes: int | None = None
    max_records_per_s_per_partition: float | None = None
    max_lag_records: int | None = None
    lag_growing_for_s: float | None = None
    max_factor: int = 4
    rate_window_s: float = 10.0

    def __post_init__(self) -> None:
        thresholds = self.thresholds()
        if not thresholds:
            raise InvalidPolicyError(
                "growth policy has no threshold - set at least one of max_partition_bytes, "
                "max_records_per_s_per_partition or max_lag_records"
            )
        for name, value in {**thresholds, "lag_growing_for_s": self.lag_growing_for_s}.items():
            if value is not None and (isinstance(value, bool) or not value > 0):
                raise InvalidPolicyError(
                    f"growth policy {name}={value!r} must be a positive number - "
                    "use None to switch that threshold off"
                )
        if self.lag_growing_for_s is not None and self.max_lag_records is None:
            raise InvalidPolicyError(
                "growth policy lag_growing_for_s needs max_lag_records - set both or neither"
            )
        if isinstance(self.max_factor, bool) or not isinstance(self.max_factor, int) or (
            self.max_factor < 2 or not _is_power_of_two(self.max_factor)
        ):
            raise InvalidPolicyError(
                f"growth policy max_factor={self.max_factor!r} must be a power of two >= 2 "
                "(2, 4, 8, ...): partitions only grow by powers of two"
            )
        if not self.rate_window_s > 0:
            raise InvalidPolicyError(
                f"growth policy rate_window_s={self.rate_window_s!r} must be positive"
            )

    def thresholds(self) -> dict[str, float]:
        """The thresholds that are on, by name."""
        named = {
            "max_partition_bytes": self.max_partition_bytes,
            "max_records_per_s_per_partition": self.max_records_per_s_per_partition,
            "max_lag_records": self.max_lag_records,
        }
        return {k: v for k, v in named.items() if v is not None}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> GrowthPolicy:
        unknown = set(doc) - set(cls.__dataclass_fields__)
        if unknown:
            raise InvalidPolicyError(
                f"growth policy has unknown setting(s) {sorted(unknown)} - known: "
                f"{sorted(cls.__dataclass_fields__)}"
            )
        return cls(**doc)


@dataclass(frozen=True)
class TopicFigures:
    """Live figures of one topic and the job reading it, measured by `_kafka.figures`.

    ``lag_growth_records`` is the lag at the end of the window minus the lag at its start
    (None when the job has no committed offsets yet).
    """

    topic: str
    partitions: int
    largest_partition_bytes: int
    largest_partition: int
    max_records_per_s_per_partition: float
    busiest_partition: int
    lag_records: int | None
    lag_growth_records: int | None
    window_s: float
    size_estimated: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class GrowthDecision:
    """What the policy decided: ``factor`` 1 means no growth."""

    factor: int
    crossed: tuple[str, ...]
    reasons: tuple[str, ...]
    figures: TopicFigures
    policy: GrowthPolicy
    capped: bool = False
    ratios: Mapping[str, float] = field(default_factory=dict)

    @property
    def grow(self) -> bool:
        return self.factor > 1

    def describe(self) -> str:
        """One operator-readable line: what crossed what, or why nothing did."""
        if self.grow:
            cap = f" (capped at max_factor={self.policy.max_factor})" if self.capped else ""
            return (
                f"grow {self.figures.topic} x{self.factor}{cap}: " + "; ".join(self.reasons)
            )
        return f"no growth for {self.figures.topic}: " + "; ".join(self.reasons)

    def to_dict(self) -> dict[str, Any]:
        return {
            "factor": self.factor,
            "grow": self.grow,
            "crossed": list(self.crossed),
            "reasons": list(self.reasons),
            "capped": self.capped,
            "figures": self.figures.to_dict(),
            "policy": self.policy.to_dict(),
        }


def factor_for_ratio(ratio: float) -> int:
    """Smallest power of two ``f`` with ``ratio / f <= 1`` (1 when ``ratio <= 1``)."""
    if ratio <= 1:
        return 1
    return 2 ** math.ceil(math.log2(ratio) - 1e-12)


def decide(policy: GrowthPolicy, figures: TopicFigures) -> GrowthDecision:
    """Compare the figures with the policy; the factor is the largest any crossed figure needs.

    Size and rate divide by the factor when the topic grows (keys spread over ``f`` times as
    many partitions). Lag does not: a lag past its threshold (and growing, when
    ``lag_growing_for_s`` is set) asks for the smallest growth, x2.
    """
    crossed: list[str] = []
    reasons: list[str] = []
    ratios: dict[str, float] = {}
    factor = 1
    checks = (
        ("max_partition_bytes", policy.max_partition_bytes, figures.largest_partition_bytes,
         f"partition {figures.largest_partition} holds {figures.largest_partition_bytes} bytes"
         + (" (estimated)" if figures.size_estimated else "")),
        ("max_records_per_s_per_partition", policy.max_records_per_s_per_partition,
         figures.max_records_per_s_per_partition,
         f"partition {figures.busiest_partition} takes "
         f"{figures.max_records_per_s_per_partition:.1f} records/s over "
         f"{figures.window_s:.0f} s"),
    )
    for name, threshold, value, what in checks:
        if threshold is None:
            continue
        ratio = value / threshold
        ratios[name] = ratio
        if value > threshold:
            crossed.append(name)
            need = factor_for_ratio(ratio)
            factor = max(factor, need)
            reasons.append(f"{what} > {name}={threshold} (needs x{need})")
        else:
            reasons.append(f"{what} <= {name}={threshold}")
    if policy.max_lag_records is not None:
        lag = figures.lag_records
        if lag is None:
            reasons.append("job has no committed offsets yet: lag threshold not evaluated")
        else:
            growing = figures.lag_growth_records
            over = lag > policy.max_lag_records
            trend_ok = policy.lag_growing_for_s is None or (growing is not None and growing > 0)
            trend = (
                ""
                if policy.lag_growing_for_s is None
                else f", grew by {growing} over {figures.window_s:.0f} s"
            )
            ratios["max_lag_records"] = lag / policy.max_lag_records
            if over and trend_ok:
                crossed.append("max_lag_records")
                factor = max(factor, 2)
                reasons.append(
                    f"job lag {lag} records{trend} > max_lag_records={policy.max_lag_records}"
                    " (needs x2)"
                )
            else:
                why = "" if over else f" <= max_lag_records={policy.max_lag_records}"
                if over and not trend_ok:
                    why = f" > max_lag_records={policy.max_lag_records} but not growing"
                reasons.append(f"job lag {lag} records{trend}{why}")
    capped = factor > policy.max_factor
    return GrowthDecision(
        factor=min(factor, policy.max_factor),
        crossed=tuple(crossed),
        reasons=tuple(reasons),
        figures=figures,
        policy=policy,
        capped=capped,
        ratios=ratios,
    )


__all__ = [
    "GrowthDecision",
    "GrowthPolicy",
    "InvalidPolicyError",
    "TopicFigures",
    "decide",
    "factor_for_ratio",
]
