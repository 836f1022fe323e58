"""The typed results that one step keeps in the expansion record and another step reads (the
plan step's `PlanResult` and the stop step's `StopResult` read by the report, the standby
step's `StandbyResult` read by the submit step): here, so that step modules never import each
other (an import contract)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_samza_expand.core._record import ExpansionRecord


@dataclass(frozen=True)
class PlanResult:
    """``results["plan"]``: who planned, the lag and conformance measured, and (when there was
    one) the growth policy's decisions, the other readers found and the restart chosen."""

    holder: str | None = None
    lag: Mapping[str, Any] | None = None
    conformance: Mapping[str, Any] | None = None
    policy: list[Any] | None = None
    readers: Mapping[str, Any] | None = None
    restart: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        doc = {"holder": self.holder, "lag": self.lag, "conformance": self.conformance}
        return doc | self.extra()

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any] | None) -> PlanResult:
        doc = doc if isinstance(doc, Mapping) else {}
        return cls(**{k: doc.get(k) for k in cls.__dataclass_fields__})

    @classmethod
    def of(cls, record: ExpansionRecord | None) -> PlanResult:
        return cls.from_dict(record.results.get("plan") if record is not None else None)

    def extra(self) -> dict[str, Any]:
        """The policy, readers and restart that are present (a `PlanOutcome`'s ``extra``)."""
        found = {"policy": self.policy, "readers": self.readers, "restart": self.restart}
        return {k: v for k, v in found.items() if v}


@dataclass(frozen=True)
class StandbyResult:
    """``results["standby"]`` (or ``["hot_standby"]``): the redacted handles of every launch."""

    launches: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"launches": list(self.launches)}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any] | None) -> StandbyResult:
        launches = (doc or {}).get("launches") if isinstance(doc, Mapping) else None
        return cls(list(launches or ()))

    @classmethod
    def of(cls, record: ExpansionRecord, step: str = "standby") -> StandbyResult:
        return cls.from_dict(record.results.get(step))


@dataclass(frozen=True)
class StopResult:
    """``results["stop"]`` and the stop task's XCom: the version stopped, who stopped, how long
    it waited, whether a stop was requested (False: nothing ran), the wait for a warm standby."""

    version: int | None = None
    stopped: list[str] = field(default_factory=list)
    waited_s: float = 0.0
    requested: bool = False
    standby_waited_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "stopped": list(self.stopped),
            "waited_s": self.waited_s,
            "requested": self.requested,
            "standby_waited_s": self.standby_waited_s,
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any] | None) -> StopResult:
        doc = doc or {}
        return cls(
            doc.get("version"),
            list(doc.get("stopped") or ()),
            float(doc.get("waited_s") or 0.0),
            bool(doc.get("requested")),
            doc.get("standby_waited_s"),
        )

    @classmethod
    def of(cls, record: ExpansionRecord | None) -> StopResult | None:
        """The record's stop result; None when the step left none."""
        if record is None or "stop" not in record.results:
            return None
        return cls.from_dict(record.results.get("stop"))


__all__ = ["PlanResult", "StandbyResult", "StopResult"]
