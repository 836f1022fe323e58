"""The write_model step: write job model vN+1 = vN with the live counts, the new partitions
mapped by the job's grouper. Idempotent for one expansion: a rerun finds its vN+1 written
(no-op); a vN+1 written by anyone else is a refusal naming them. Its result in the record is
`ModelSummary`."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._protocol import records
from airflow_samza_expand._protocol.ownership import planned_by
from airflow_samza_expand.core._lease import Lease
from airflow_samza_expand.core._plan import plan_expansion
from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus
from airflow_samza_expand.core.errors import (
    ConcurrentExpansionError,
    ExpansionError,
    InvalidGrowthError,
)
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store import CoordinatorStore

log = logging.getLogger(__name__)
S = ExpansionStatus


@dataclass(frozen=True)
class ModelSummary:
    """``results["write"]`` and the task's XCom: the job model in force after the step."""

    job_name: str
    version: int
    written: bool
    counts: Mapping[str, int] = field(default_factory=dict)
    tasks: int = 0
    created_by: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_name": self.job_name,
            "version": self.version,
            "written": self.written,
            "counts": dict(self.counts),
            "tasks": self.tasks,
            "created_by": self.created_by,
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> ModelSummary:
        return cls(
            str(doc.get("job_name")),
            int(doc["version"]),
            bool(doc.get("written")),
            {str(s): int(n) for s, n in (doc.get("counts") or {}).items()},
            int(doc.get("tasks") or 0),
            doc.get("created_by"),
        )

    @classmethod
    def of_model(cls, model: JobModel, *, written: bool) -> ModelSummary:
        return cls(
            model.job_name,
            model.version,
            written,
            model.partition_counts(),
            len(model.tasks()),
            model.created_by,
        )

    @staticmethod
    def noted_version(record: ExpansionRecord) -> int | None:
        """The version this expansion's write step noted in the record, if any."""
        doc = record.results.get("write")
        if not isinstance(doc, Mapping) or doc.get("version") is None:
            return None
        return ModelSummary.from_dict(doc).version


def model_summary(model: JobModel, *, written: bool) -> dict[str, Any]:
    """The step's result for `model` as a dict (`ModelSummary`)."""
    return ModelSummary.of_model(model, written=written).to_dict()


def _writer(model: JobModel | None) -> str:
    if model is None:
        return "an unknown writer"
    return f"{model.created_by!r} (v{model.version}, at {model.created_at})"


def write_job_model(
    admin: KafkaAdmin,
    store: CoordinatorStore,
    writer: str,
    *,
    expansion_id: str | None = None,
    require_power_of_two: bool = True,
    lease: Lease | None = None,
    next_model: Any = None,
) -> dict[str, Any]:
    """Write vN+1 = vN with the live counts, new partitions mapped by the job's grouper
    (``next_model(latest, live, writer)`` replaces that mapping: the demo's naive writer).
    A rerun finds vN+1 written for its expansion (no-op); anyone else's: refusal naming them."""
    latest = store.latest_job_model()
    if latest is None:
        raise ExpansionError(
            f"job {store.job_name!r} has no job model in its coordinator store - the job writes "
            "v1 when it first starts"
        )
    record = records.require(store, expansion_id) if expansion_id else None
    if record is not None and latest.version != record.base_version:
        return _already_written(store, latest, record, writer, lease)
    live = admin.partition_counts(sorted(latest.partition_counts()))
    targets = {s: n for s, n in live.items() if n != latest.partition_counts()[s]}
    if record is not None:
        planned = {s: int(n) for s, n in record.plan["counts_after"].items()}
        grown = {s: after for s, (_, after) in record.grown_counts().items()}
        if targets != grown:
            raise InvalidGrowthError(
                f"live partition counts {live} do not match expansion {expansion_id!r} "
                f"(planned {planned}) - run ExpandPartitionsOperator first"
            )
        # before anything is written: the barrier and the stop must have ended
        records.check_reachable(record, S.JOB_MODEL_WRITTEN, "write")
    if not targets:
        log.info(
            "Job model v%d of %s (by %s) already matches the live counts %s: nothing to write.",
            latest.version,
            store.job_name,
            latest.created_by,
            live,
        )
        return model_summary(latest, written=False)
    if next_model is not None:
        model = next_model(latest, live, writer)
    else:
        model = plan_expansion(
            latest, live, targets, require_power_of_two=require_power_of_two, created_by=writer
        ).new_job_model
    if expansion_id:
        records.begin(store, expansion_id, "write", fence=lease)
    log.info(
        "Writing job model v%d of %s: counts %s -> %s, %d tasks.",
        model.version,
        store.job_name,
        latest.partition_counts(),
        model.partition_counts(),
        len(model.tasks()),
    )
    try:
        written = store.write_job_model(model)
    except ConcurrentExpansionError as exc:
        raise ConcurrentExpansionError(
            f"job model v{model.version} of {store.job_name!r} was written by "
            f"{_writer(store.latest_job_model())} while {writer} wrote it; theirs stays in "
            f"force - inspect that expansion before retrying ({exc})"
        ) from exc
    if written.created_by != writer:
        raise ConcurrentExpansionError(
            f"job model v{written.version} of {store.job_name!r} was written by "
            f"{_writer(written)} at the same time as {writer}; theirs stays in force - inspect "
            "that expansion before retrying"
        )
    summary = model_summary(written, written=True)
    records.record_step(store, expansion_id, "write", S.JOB_MODEL_WRITTEN, summary, lease)
    return summary


def _owners(record: ExpansionRecord, writer: str) -> tuple[str | None, ...]:
    """Who may have written this expansion's vN+1: this writer, the record's owner, and the
    run that planned it (before another run took it over)."""
    return (writer, record.owner, planned_by(record))


def _already_written(
    store: CoordinatorStore,
    latest: JobModel,
    record: ExpansionRecord,
    writer: str,
    lease: Lease | None,
) -> dict[str, Any]:
    """The newest model is past the plan's base: this expansion's vN+1 (no-op) or another's."""
    planned = {s: int(n) for s, n in record.plan["counts_after"].items()}
    noted = ModelSummary.noted_version(record)
    ours = latest.version == record.target_version and (
        noted == latest.version
        or (latest.created_by in _owners(record, writer) and latest.partition_counts() == planned)
    )
    if not ours:
        raise ConcurrentExpansionError(
            f"expansion {record.expansion_id!r} was planned on job model v{record.base_version} "
            f"of {store.job_name!r}, but v{latest.version} is now in force, written by "
            f"{_writer(latest)} - someone else expanded the job; plan again"
        )
    log.info(
        "Job model v%d of %s is already written for expansion %s: nothing to do.",
        latest.version,
        store.job_name,
        record.expansion_id,
    )
    summary = model_summary(latest, written=False)
    if noted is None:
        records.record_step(
            store, record.expansion_id, "write", S.JOB_MODEL_WRITTEN, summary, lease
        )
    return summary


__all__ = ["ModelSummary", "model_summary", "write_job_model"]
