"""Proof of order (docs/design.md 'Stale placements'): when the barrier may snapshot, what the
expansion record keeps about stale placements, and the report's ``order:`` line. Pure functions.

The barrier snapshots only after the producer refresh grace **and** a quiet window
(``stale_quiet_s``) in which the scan of the old partitions found no stale placement and is
caught up; stale placements that keep arriving extend the wait up to the barrier's deadline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from airflow_samza_expand.core._modes import OnStalePlacement
from airflow_samza_expand.core._stale import StalePlacement, StaleSummary

DEFAULT_STALE_QUIET_S = 30.0  # three poll intervals of the barrier sensor (10 s)
SCAN_SOURCE = "the barrier's scan"  # ``counted_by`` of the evidence before the snapshot
JOB_SOURCE = "the job's micro-batches"
ON_STALE_PLACEMENT = OnStalePlacement.values()  # what a stale placement does


@dataclass(frozen=True)
class OrderEvidence:
    """What the expansion record keeps in ``stale_placements`` (JSON via `to_dict`).

    ``scan_start``/``scan_positions``: the old partitions' end offsets at the expansion and the
    next offset ``before_snapshot`` covers (from ``scan_start`` on, contiguous).
    ``before_snapshot``: stale placements the barrier saw (held by it), counted by
    ``counted_by`` (the barrier's scan, or the job's micro-batches: `JobStaleCount`);
    ``seen_ends``: the barrier's target for the job's count (the old partitions' end offsets at
    an earlier look, `job_coverage`/`next_target`; the scan sets them at each poll).
    ``after_snapshot``: those the restarted job read beyond the barrier offsets (order at
    risk).
    """

    partitioner: tuple[str, ...] = ()
    scan_start: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    scan_positions: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    last_stale_at: str | None = None
    before_snapshot: StaleSummary = field(default_factory=StaleSummary)
    after_snapshot: StaleSummary = field(default_factory=StaleSummary)
    counted_by: str = ""
    seen_ends: Mapping[str, Mapping[int, int]] = field(default_factory=dict)

    def with_scan(
        self, positions: Mapping[str, Mapping[int, int]], found: list[StalePlacement], at: str
    ) -> OrderEvidence:
        """After one barrier scan poll that read up to ``positions`` and found ``found``."""
        return replace(
            self,
            scan_positions={t: dict(ps) for t, ps in positions.items()},
            before_snapshot=self.before_snapshot.add(found),
            last_stale_at=at if found else self.last_stale_at,
            counted_by=(
                self.counted_by
                if SCAN_SOURCE in self.counted_by
                else " and ".join(filter(None, (self.counted_by, SCAN_SOURCE)))
            ),
        )

    def with_job_count(self, count: JobStaleCount) -> OrderEvidence:
        """Take a processor's count (it covers ``scan_positions``: `job_coverage`)."""
        last = max(filter(None, (self.last_stale_at, count.last_stale_at)), default=None)
        return replace(
            self,
            scan_positions={t: dict(ps) for t, ps in count.checked.items()},
            before_snapshot=count.summary,
            last_stale_at=last,
            counted_by=count.source(),
        )

    def with_ends(self, ends: Mapping[str, Mapping[int, int]]) -> OrderEvidence:
        """After a look that saw the old partitions' end offsets ``ends``."""
        return replace(self, seen_ends={t: dict(ps) for t, ps in ends.items()})

    def with_job_placements(self, summary: StaleSummary) -> OrderEvidence:
        return replace(self, after_snapshot=summary)

    def to_dict(self) -> dict[str, Any]:
        return {
            "partitioner": list(self.partitioner),
            "scan_start": _offsets_out(self.scan_start),
            "scan_positions": _offsets_out(self.scan_positions),
            "last_stale_at": self.last_stale_at,
            "before_snapshot": self.before_snapshot.to_dict(),
            "after_snapshot": self.after_snapshot.to_dict(),
            "counted_by": self.counted_by,
            "seen_ends": _offsets_out(self.seen_ends),
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any] | None) -> OrderEvidence:
        """Inverse of `to_dict` ({} or None: nothing recorded yet); ValueError naming a field."""
        if not doc:
            return cls()
        try:
            return cls(
                partitioner=tuple(str(n) for n in doc.get("partitioner", ())),
                scan_start=_offsets_in(doc.get("scan_start", {})),
                scan_positions=_offsets_in(doc.get("scan_positions", {})),
                last_stale_at=doc.get("last_stale_at"),
                before_snapshot=StaleSummary.from_dict(doc.get("before_snapshot")),
                after_snapshot=StaleSummary.from_dict(doc.get("after_snapshot")),
                counted_by=str(doc.get("counted_by") or ""),
                seen_ends=_offsets_in(doc.get("seen_ends", {})),
            )
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"malformed stale_placements of an expansion record: {exc}") from None


@dataclass(frozen=True)
class JobStaleCount:
    """A processor's count of stale placements before an expansion's snapshot, in the records
    its micro-batches read anyway (the proof of order at production rates): published in the
    coordinator store (kind ``stale-count``, key: the expansion id), taken by the barrier
    (`job_coverage`).

    ``checked``: the next offset to check of every old partition; everything from the
    expansion's scan start up to it is counted in ``summary``, once (contiguous ranges: a
    replayed batch counts nothing twice). ``last_stale_at``: when it last found one (ISO).
    ``records``/``rescanned``: records checked, and of those re-read by its driver (ranges no
    batch report covered).
    """

    expansion_id: str
    processor_id: str
    job_model_version: int
    checked: Mapping[str, Mapping[int, int]]
    summary: StaleSummary = field(default_factory=StaleSummary)
    last_stale_at: str | None = None
    updated_at: str | None = None
    records: int = 0
    rescanned: int = 0

    def source(self) -> str:
        """``counted_by`` of the evidence that takes this count."""
        return f"{JOB_SOURCE} (processor {self.processor_id}, {self.records} records)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "expansion_id": self.expansion_id,
            "processor_id": self.processor_id,
            "job_model_version": self.job_model_version,
            "checked": _offsets_out(self.checked),
            "summary": self.summary.to_dict(),
            "last_stale_at": self.last_stale_at,
            "updated_at": self.updated_at,
            "records": self.records,
            "rescanned": self.rescanned,
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> JobStaleCount:
        """Inverse of `to_dict`; ValueError naming the problem."""
        try:
            return cls(
                expansion_id=str(doc["expansion_id"]),
                processor_id=str(doc["processor_id"]),
                job_model_version=int(doc["job_model_version"]),
                checked=_offsets_in(doc["checked"]),
                summary=StaleSummary.from_dict(doc.get("summary")),
                last_stale_at=doc.get("last_stale_at"),
                updated_at=doc.get("updated_at"),
                records=int(doc.get("records", 0)),
                rescanned=int(doc.get("rescanned", 0)),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"malformed stale-count record: {exc!r}") from None


def _offsets_out(offsets: Mapping[str, Mapping[int, int]]) -> dict[str, dict[str, int]]:
    return {t: {str(p): int(o) for p, o in sorted(ps.items())} for t, ps in sorted(offsets.items())}


def _offsets_in(doc: Mapping[str, Mapping[Any, Any]]) -> dict[str, dict[int, int]]:
    return {str(t): {int(p): int(o) for p, o in dict(ps).items()} for t, ps in dict(doc).items()}


# -- the report ----------------------------------------------------------------------------------


def order_proven(after: StaleSummary) -> bool:
    return after.records == 0


def order_line(before: StaleSummary, after: StaleSummary, *, examples: int = 3) -> str:
    """The report's verdict: ``order: proven (...)`` or ``order: at risk - n records of k keys
    (examples ...)``. Never silent: both counts are always named."""
    if order_proven(after):
        return (
            f"order: proven (0 stale placements after the snapshot; {before.records} before "
            "it, held by the barrier)"
        )
    shown = "; ".join(
        f"key {e.key!r} at {e.topic}[{e.partition}]@{e.offset}, belongs in "
        f"{e.topic}[{e.expected_partition}]"
        for e in after.examples[:examples]
    )
    return (
        f"order: at risk - {after.records} records of {after.key_count()} keys (examples "
        f"{shown}); {before.records} stale placements before the snapshot were held by the "
        "barrier"
    )


def order_report(before: StaleSummary, after: StaleSummary) -> dict[str, Any]:
    """The JSON form of the verdict (report.json, the report step's result)."""
    return {
        "order": "proven" if order_proven(after) else "at risk",
        "line": order_line(before, after),
        "stale_before_snapshot": before.records,
        "stale_after_snapshot": after.records,
        "keys_at_risk": [{"key": k, "records": n} for k, n in sorted(after.keys.items())],
        "keys_at_risk_truncated": after.keys_truncated,
        "examples": [e.to_dict() for e in after.examples],
    }


def check_on_stale_placement(value: str) -> str:
    """``warn`` or ``fail``; ValueError naming the choices otherwise."""
    if value not in ON_STALE_PLACEMENT:
        raise ValueError(
            f"on_stale_placement {value!r} is not understood - give 'warn' (count, log and "
            "report) or 'fail' (stop the job)"
        )
    return value


__all__ = [
    "DEFAULT_STALE_QUIET_S",
    "ON_STALE_PLACEMENT",
    "JOB_SOURCE",
    "SCAN_SOURCE",
    "JobStaleCount",
    "OrderEvidence",
    "check_on_stale_placement",
    "order_line",
    "order_proven",
    "order_report",
]
