"""The typed records the UI pages and JSON API show (built by `data`, rendered by `html`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_samza_expand.core._liveness import advertised_group
from airflow_samza_expand.core.model import JobModel

if TYPE_CHECKING:
    from airflow_samza_expand._protocol.status.job_status import JobStatus


class UiProblem(Exception):
    """A fault shown as a message: HTTP ``status``, a short ``title`` and the full ``message``."""

    def __init__(self, status: int, title: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.title = title
        self.message = message


@dataclass(frozen=True)
class JobRef:
    name: str
    sources: tuple[str, ...]  # "configured" and/or "coordinator topic"


@dataclass(frozen=True)
class Step:
    name: str  # the DAG's task id (protocol.steps.Step.title)
    started_at: str | None
    ended_at: str | None
    duration_s: float | None  # the record's: ended_at - started_at
    record_step: str = ""  # its name in the expansion record


@dataclass(frozen=True)
class TaskRun:
    """One task instance of the DAG run behind an expansion, as Airflow recorded it."""

    task_id: str
    state: str | None
    started_at: str | None
    ended_at: str | None
    duration_s: float | None  # Airflow's own (its last try)
    try_number: int | None
    log_path: str  # the task's page in Airflow's UI, below Airflow's root path


@dataclass(frozen=True)
class BarrierRow:
    topic: str
    partition: int
    barrier_offset: int
    committed: int | None
    lag: int


@dataclass(frozen=True)
class Expansion:
    expansion_id: str
    status: str
    old_version: int | None
    new_version: int | None
    counts_before: Mapping[str, int]
    counts_after: Mapping[str, int]
    owner: str | None
    updated_at: str | None
    steps: tuple[Step, ...]
    barrier_snapshot_at: str | None
    barrier_passed_at: str | None
    barrier: Mapping[str, Mapping[int, int]]  # topic -> partition -> barrier offset
    log_path: str | None
    plan: Mapping[str, Any]
    grace_started_at: str | None = None  # the producer refresh grace runs from here
    grace_s: float | None = None  # its length, as the barrier step recorded it
    grace_ends_at: str | None = None
    # the barrier lag as the barrier step polled it: {at, total, partitions: {"topic[p]": lag}}
    lag_history: tuple[Mapping[str, Any], ...] = ()
    # detached launches of the new version (submit, standby): {started_at, log_path, pid, ...}
    launches: tuple[Mapping[str, Any], ...] = ()
    # the proof of order's verdict so far: "order: proven ..." / "order: at risk ..." (stale
    # placements before and after the snapshot), and whether it is at risk
    order: str | None = None
    order_at_risk: bool = False
    restart: str | None = None  # the restart mode the plan chose (`_protocol.restart`)
    # the task instances of the DAG run that owns it (`airflow_tasks`), start order
    tasks: tuple[TaskRun, ...] = ()


@dataclass(frozen=True)
class Processor:
    processor_id: str
    state: str
    job_model_version: int | None
    role: str | None
    heartbeat_at: str | None
    heartbeat_age_s: float | None
    alive: bool
    # from the heartbeat: input partitions its job model does not cover (spark._coverage) and
    # the stale placements its order check counted (core._stale.StaleSummary.counts)
    uncovered: Mapping[str, Sequence[int]] = field(default_factory=dict)
    stale_placements: Mapping[str, Any] | None = None
    consumer_group: str | None = None  # the group it commits its processed offsets to

    def warnings(self) -> list[str]:
        """What an operator must look at: partitions not read, keys whose order is at risk."""
        out = [  # a processor that does not run reads nothing: only a live one's coverage counts
            f"does not read {topic} partitions {list(parts)}"
            for topic, parts in sorted(self.uncovered.items())
            if self.alive
        ]
        stale = self.stale_placements or {}
        if stale.get("records"):
            keys = [str(k) for k, _ in stale.get("keys") or []]
            more = "at least " if stale.get("keys_truncated") else ""
            shown = ", ".join(keys[:5]) + (", ..." if len(keys) > 5 else "")
            out.append(
                f"order at risk: {stale['records']} stale placements, {more}{len(keys)} keys "
                f"({shown})"
            )
        return out


@dataclass(frozen=True)
class LeaseInfo:
    name: str
    holder: str
    epoch: int | None
    renewed_at: str | None
    expires_in_s: float | None  # None once released (a released lease does not expire)
    expired: bool  # its holder stopped renewing it; False once released
    released: bool = False  # its holder let it go: the expansion no longer holds it
    expires_at: str | None = None  # renewed_at + ttl (the page counts down to it)


@dataclass(frozen=True)
class LogTail:
    path: str
    text: str
    note: str = ""


@dataclass
class JobSnapshot:
    """What the job page shows, read in one request."""

    job: str
    store: str
    history: list[JobModel]
    live_counts: dict[str, int] = field(default_factory=dict)
    expansions: list[Expansion] = field(default_factory=list)
    barrier_rows: list[BarrierRow] = field(default_factory=list)
    barrier_of: str | None = None  # expansion id whose barrier barrier_rows measure
    processors: list[Processor] = field(default_factory=list)
    leases: list[LeaseInfo] | None = None  # None: this store has no leases yet
    stop_request: Mapping[str, Any] | None = None
    log: LogTail | None = None
    problems: list[str] = field(default_factory=list)
    # the same reads as `samza-expand status` sees them: its next action is the page's top line
    status: JobStatus | None = None

    @property
    def consumer_group(self) -> str:
        """The group holding the job's processed offsets: the one its processors advertise
        (the newest heartbeat, `core._liveness.advertised_group`), else the job name."""
        return advertised_group(self.processors) or self.job

    @property
    def latest(self) -> JobModel | None:
        return self.history[-1] if self.history else None

    def model(self, version: int) -> JobModel | None:
        return next((m for m in self.history if m.version == version), None)
