"""The expansion record: a typed, versioned document and its state machine.

Why: docs/design.md 'The record state machine'.

One record per expansion id, stored in the coordinator under key type ``expansion``. Every
update goes through the store's conditional ``put_expansion(record, expected_revision=...)``:
the store sets `revision` (1 on create, +1 per update) and rejects a stale one, so no update is
lost; the caller re-reads and re-applies its change.

Status machine (`TRANSITIONS`; staying in the same status is always allowed, so a rerun of a
step is idempotent)::

    planned -> expanded -> barrier-snapshot -> barrier-passed -> job-stopped
            -> job-model-written -> submitted -> completed
    expanded -> barrier-passed                (snapshot and pass in one poll)
    job-model-written -> completed            (the job was restarted outside the DAG)
    any status but completed -> failed
    failed -> any status but planned          (a rerun resumes the expansion)

JSON (sorted keys)::

    {"barrier": {"orders": {"0": 120}}, "base_version": 1, "created_at": "...Z",
     "expansion_id": "...", "format": 1, "job_name": "...", "owner": "airflow:<dag>/<run>",
     "plan": {...}, "results": {...}, "revision": 3, "stale_placements": {},
     "status": "barrier-snapshot", "steps": {"plan": {"ended_at": "...", "started_at": "..."}},
     "target_version": 2, "updated_at": "...Z"}

Values under secret-looking keys are refused (`core._secrets`): a record never holds a secret.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from airflow_samza_expand.core._clock import now_iso, parse_iso
from airflow_samza_expand.core._frozen import FrozenDict, freeze, fresh_parts, thaw
from airflow_samza_expand.core._secrets import refuse_secrets
from airflow_samza_expand.core.errors import (
    CorruptCoordinatorRecordError,
    InvalidTransitionError,
)

RECORD_FORMAT = 1


class ExpansionStatus(StrEnum):
    """Where an expansion is; the values are the strings stored (and shown) since v1."""

    PLANNED = "planned"
    EXPANDED = "expanded"
    BARRIER_SNAPSHOT = "barrier-snapshot"
    BARRIER_PASSED = "barrier-passed"
    JOB_STOPPED = "job-stopped"
    JOB_MODEL_WRITTEN = "job-model-written"
    SUBMITTED = "submitted"
    COMPLETED = "completed"
    FAILED = "failed"


_S = ExpansionStatus
TRANSITIONS: Mapping[ExpansionStatus, frozenset[ExpansionStatus]] = MappingProxyType(
    {
        _S.PLANNED: frozenset({_S.EXPANDED, _S.FAILED}),
        _S.EXPANDED: frozenset({_S.BARRIER_SNAPSHOT, _S.BARRIER_PASSED, _S.FAILED}),
        _S.BARRIER_SNAPSHOT: frozenset({_S.BARRIER_PASSED, _S.FAILED}),
        _S.BARRIER_PASSED: frozenset({_S.JOB_STOPPED, _S.FAILED}),
        _S.JOB_STOPPED: frozenset({_S.JOB_MODEL_WRITTEN, _S.FAILED}),
        _S.JOB_MODEL_WRITTEN: frozenset({_S.SUBMITTED, _S.COMPLETED, _S.FAILED}),
        _S.SUBMITTED: frozenset({_S.COMPLETED, _S.FAILED}),
        _S.COMPLETED: frozenset(),
        _S.FAILED: frozenset(set(_S) - {_S.PLANNED, _S.FAILED}),
    }
)
TERMINAL = frozenset({_S.COMPLETED})
# The run's statuses in order; ``failed`` is off it (a failed record has reached nothing new).
ORDER: tuple[ExpansionStatus, ...] = (
    _S.PLANNED,
    _S.EXPANDED,
    _S.BARRIER_SNAPSHOT,
    _S.BARRIER_PASSED,
    _S.JOB_STOPPED,
    _S.JOB_MODEL_WRITTEN,
    _S.SUBMITTED,
    _S.COMPLETED,
)


@dataclass(frozen=True)
class StepTimes:
    """When one step (``plan``, ``expand``, ``barrier``, ``stop``, ``write``, ...) ran."""

    started_at: str | None = None
    ended_at: str | None = None

    def __post_init__(self) -> None:
        for name in ("started_at", "ended_at"):
            value = getattr(self, name)
            if value is not None:
                parse_iso(value)

    def to_dict(self) -> dict[str, str | None]:
        return {"ended_at": self.ended_at, "started_at": self.started_at}

    @property
    def seconds(self) -> float | None:
        """How long the step ran (start to end, ms precision); None until both are known.
        The one duration of a step: the report prints it, the job page shows it."""
        if self.started_at is None or self.ended_at is None:
            return None
        took = parse_iso(self.ended_at) - parse_iso(self.started_at)
        return round(max(took.total_seconds(), 0.0), 3)


def _same(value: Any) -> Any:
    return value


def _frozen_barrier(barrier: Mapping[str, Mapping[int, int]]) -> FrozenDict:
    if isinstance(barrier, FrozenDict):
        return barrier
    return FrozenDict(
        {
            str(topic): FrozenDict({int(p): int(o) for p, o in offsets.items()})
            for topic, offsets in barrier.items()
        }
    )


@dataclass(frozen=True)
class ExpansionRecord:
    """One expansion of one job, from plan to completion (module docstring)."""

    expansion_id: str
    job_name: str
    base_version: int
    target_version: int
    plan: Mapping[str, Any]
    status: ExpansionStatus
    owner: str
    created_at: str
    updated_at: str
    revision: int = 0
    steps: Mapping[str, StepTimes] = field(default_factory=dict)
    barrier: Mapping[str, Mapping[int, int]] | None = None
    results: Mapping[str, Any] = field(default_factory=dict)
    stale_placements: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("expansion_id", "job_name", "owner"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"expansion record field {name!r} must be a non-empty string")
        for name in ("base_version", "target_version", "revision"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"expansion record field {name!r} must be an integer >= 0")
        if self.target_version != self.base_version + 1:
            raise ValueError(
                f"expansion record field 'target_version' ({self.target_version}) must be "
                f"base_version + 1 ({self.base_version + 1})"
            )
        try:
            object.__setattr__(self, "status", ExpansionStatus(self.status))
        except ValueError:
            raise ValueError(
                f"expansion record field 'status' is {self.status!r}, not one of "
                f"{[s.value for s in ExpansionStatus]}"
            ) from None
        parse_iso(self.created_at)
        parse_iso(self.updated_at)
        if not isinstance(self.steps, FrozenDict):
            steps = {
                str(step): times if isinstance(times, StepTimes) else StepTimes(**times)
                for step, times in dict(self.steps).items()
            }
            object.__setattr__(self, "steps", FrozenDict(steps))
        if self.barrier is not None:
            object.__setattr__(self, "barrier", _frozen_barrier(self.barrier))
        # a part is frozen once, when it enters (`core._frozen`): a change copies and checks
        # only what it brings, every other part is shared with the record it came from
        for name in ("plan", "results", "stale_placements"):
            value = getattr(self, name) or {}
            what = f"expansion record {self.expansion_id!r} {name.replace('_', ' ')}"
            refuse_secrets(fresh_parts(value), what)
            object.__setattr__(self, name, freeze(value))

    def grown_counts(self) -> dict[str, tuple[int, int]]:
        """``{stream: (before, after)}`` of the streams this expansion grows. A stream the plan
        lists with the same count before and after (a join's other side) stays: it is never
        grown, never waited for and never behind a barrier."""
        before = self.plan.get("counts_before") or {}
        after = self.plan.get("counts_after") or {}
        return {
            str(s): (int(before[s]), int(n))
            for s, n in sorted(after.items())
            if s in before and int(before[s]) != int(n)
        }

    # -- where it is ------------------------------------------------------------------------

    def reached(self, status: ExpansionStatus | str) -> bool:
        """At `status` or past it in `ORDER` (a failed record has reached nothing new)."""
        target = ExpansionStatus(status)
        if self.status not in ORDER or target not in ORDER:
            return self.status == target
        return ORDER.index(self.status) >= ORDER.index(target)

    def may_reach(self, status: ExpansionStatus | str) -> bool:
        """A step that ends at `status` may act on this record: it is there or past it (a
        rerun, which moves nothing back), or `status` may follow its status."""
        target = ExpansionStatus(status)
        return self.reached(target) or target in TRANSITIONS[self.status]

    # -- changes (each returns a new record; the store sets the revision) -------------------

    def check_successor(self, status: ExpansionStatus | str) -> ExpansionStatus:
        """`status` if it may follow this record's status, else InvalidTransitionError."""
        target = ExpansionStatus(status)
        if target != self.status and target not in TRANSITIONS[self.status]:
            allowed = ", ".join(sorted(TRANSITIONS[self.status])) or "none (it is final)"
            raise InvalidTransitionError(
                f"expansion {self.expansion_id!r} is {self.status.value!r}; it cannot become "
                f"{target.value!r} (allowed next: {allowed}) - re-read the record and resume "
                "from its status"
            )
        return target

    def advance(self, status: ExpansionStatus | str, **changes: Any) -> ExpansionRecord:
        """This record moved to `status` (InvalidTransitionError if not allowed next)."""
        target = self.check_successor(status)
        changes.setdefault("updated_at", now_iso())
        return dataclasses.replace(self, status=target, **changes)

    def with_step(
        self, step: str, *, started_at: str | None = None, ended_at: str | None = None
    ) -> ExpansionRecord:
        """Record when `step` started / ended (a None keeps what is there)."""
        old = self.steps.get(step, StepTimes())
        times = StepTimes(started_at or old.started_at, ended_at or old.ended_at)
        return dataclasses.replace(self, steps={**self.steps, step: times}, updated_at=now_iso())

    def with_result(self, step: str, result: Any) -> ExpansionRecord:
        """Store `step`'s JSON result (replacing an earlier one of the same step)."""
        return dataclasses.replace(
            self, results={**self.results, step: result}, updated_at=now_iso()
        )

    # -- JSON -------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The record as plain, mutable JSON values (a copy the caller may change)."""
        return self._doc(thaw)

    def _doc(self, part: Any) -> dict[str, Any]:
        return {
            "barrier": thaw(self.barrier),  # partitions as string keys, sorted as JSON sorts them
            "base_version": self.base_version,
            "created_at": self.created_at,
            "expansion_id": self.expansion_id,
            "format": RECORD_FORMAT,
            "job_name": self.job_name,
            "owner": self.owner,
            "plan": part(self.plan),
            "results": part(self.results),
            "revision": self.revision,
            "stale_placements": part(self.stale_placements),
            "status": self.status.value,
            "steps": thaw(self.steps),
            "target_version": self.target_version,
            "updated_at": self.updated_at,
        }

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, compact); the frozen parts are written as they are."""
        try:
            return json.dumps(self._doc(_same), sort_keys=True, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"expansion record {self.expansion_id!r} is not JSON-serialisable: {exc} - "
                "put plain dicts, lists, strings and numbers in plan and results"
            ) from None

    @classmethod
    def from_dict(cls, doc: Any) -> ExpansionRecord:
        """CorruptCoordinatorRecordError naming the field when `doc` is no record."""
        if not isinstance(doc, Mapping):
            raise CorruptCoordinatorRecordError(
                f"expansion record must be a JSON object, got {type(doc).__name__}"
            )
        fields = {f.name for f in dataclasses.fields(cls)}
        required = {
            f.name
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        }
        missing = sorted(required - doc.keys())
        if missing:
            raise CorruptCoordinatorRecordError(f"expansion record misses field {missing[0]!r}")
        if doc.get("format", RECORD_FORMAT) != RECORD_FORMAT:
            raise CorruptCoordinatorRecordError(
                f"expansion record has format {doc.get('format')!r}; this version reads "
                f"format {RECORD_FORMAT} - upgrade airflow-samza-expand"
            )
        try:
            return cls(**{k: v for k, v in doc.items() if k in fields})
        except (ValueError, TypeError, AttributeError) as exc:
            raise CorruptCoordinatorRecordError(f"expansion record is invalid: {exc}") from None

    @classmethod
    def from_json(cls, text: str | bytes) -> ExpansionRecord:
        try:
            doc = json.loads(text)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CorruptCoordinatorRecordError(f"expansion record is not JSON: {exc}") from None
        return cls.from_dict(doc)


__all__ = ["ORDER", "TERMINAL", "TRANSITIONS", "ExpansionRecord", "ExpansionStatus", "StepTimes"]
