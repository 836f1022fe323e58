"""What the plan step is asked (`PlanRequest`) and what it decides (`PlanOutcome`, one of the
kinds below); what it records (`PlanResult`, the record's ``results["plan"]``) is in
`_protocol.steps.results`, which the report step reads too."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_samza_expand._protocol.steps.results import PlanResult
from airflow_samza_expand.core._plan import DEFAULT_MAX_PARTITIONS
from airflow_samza_expand.core._record import ExpansionRecord
from airflow_samza_expand.core.policy import GrowthPolicy

PLANNED, REUSED, RESUMED = "planned", "reused", "resumed"
NOTHING, DRY_RUN = "nothing-to-do", "dry-run"


@dataclass(frozen=True)
class PlanRequest:
    """What a run asks for: ``targets`` ({topic: count}) or ``topics`` x ``factor``."""

    job_name: str
    targets: Mapping[str, int] | None = None
    topics: Sequence[str] = ()
    factor: int = 2
    follow_live_counts: bool = False
    require_power_of_two: bool = True
    max_partitions: int = DEFAULT_MAX_PARTITIONS
    check_partitioner: bool = True
    sample_per_partition: int = 100
    consumer_group: str | None = None
    dry_run: bool = False
    request_timeout_s: float = 30.0
    policy: GrowthPolicy | None = None  # grow only when a live figure crosses a threshold
    other_jobs: str = "refuse"  # other managed jobs reading a grown topic: readers.py
    co_jobs: Sequence[str] = ()  # the other jobs this run expands too (multi-job factory)
    # the restart asked for (`_protocol.restart`: auto or a mode; None: the plan chooses none)
    restart: str | None = None
    # the DAG owns launching the job (it names an application or a restart task). False: the
    # plan chooses only a restart that launches nothing, and a job with no live processor is
    # `plan_wait.JobDownError` (nothing changed) - the plan task waits for it to come back
    launches: bool = True


@dataclass(frozen=True)
class PlanOutcome:
    """The plan step's decision; `to_xcom` is what the plan task returns."""

    kind: str
    message: str
    expansion_id: str | None = None
    plan: Mapping[str, Any] | None = None
    lag: Mapping[str, Any] | None = None
    conformance: Mapping[str, Any] | None = None
    status: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_xcom(self) -> dict[str, Any]:
        return {
            "expansion_id": self.expansion_id,
            "plan": dict(self.plan or {}),
            "lag": self.lag,
            "conformance": self.conformance,
            "reused": self.kind in (REUSED, RESUMED),
            "outcome": self.kind,
            "dry_run": self.kind == DRY_RUN,
            "policy": self.extra.get("policy"),
            "readers": self.extra.get("readers"),
            "unmanaged_groups": (self.extra.get("readers") or {}).get("groups", []),
            "restart": self.extra.get("restart"),
        }


def outcome_from_record(kind: str, record: ExpansionRecord, message: str) -> PlanOutcome:
    planned = PlanResult.of(record)
    return PlanOutcome(
        kind, message, record.expansion_id, record.plan, planned.lag, planned.conformance,
        record.status.value, planned.extra(),
    )  # fmt: skip
