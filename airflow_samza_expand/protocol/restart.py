"""The steps that restart the job on the new model: stop, write job model vN+1, submit
bookkeeping, acknowledgement and completion. Each is idempotent for one expansion id."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from airflow_samza_expand.core.errors import (
    ConcurrentExpansionError,
    ExpansionError,
    InvalidGrowthError,
)
from airflow_samza_expand.core.lease import Lease
from airflow_samza_expand.core.liveness import is_alive, standbys
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.core.plan import plan_expansion
from airflow_samza_expand.core.record import ExpansionRecord, ExpansionStatus
from airflow_samza_expand.kafka.admin import KafkaAdmin
from airflow_samza_expand.protocol import records
from airflow_samza_expand.protocol.waits import active_processors, describe_processors
from airflow_samza_expand.store import CoordinatorStore

log = logging.getLogger(__name__)
S = ExpansionStatus


# -- stop ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StopDecision:
    """What the stop step does: nothing (``version`` None or nothing running) or wait."""

    version: int | None
    requested: bool
    message: str


def request_stop(
    store: CoordinatorStore, reason: str, *, expansion_id: str | None = None
) -> StopDecision:
    """Write the ``stop`` control record for the running version (newest model), once.

    After the expansion wrote vN+1, nothing is stopped: the job that had to stop did, and a job
    running vN+1 is the restarted one."""
    if expansion_id:
        records.begin(store, expansion_id, "stop")
    latest = store.latest_job_model()
    version = latest.version if latest is not None else None
    if expansion_id and latest is not None:
        record = records.require(store, expansion_id)
        if latest.version >= record.target_version:
            return StopDecision(
                None,
                False,
                f"job model v{latest.version} of expansion "
                f"{expansion_id} is already written: nothing to stop",
            )
    active = active_processors(store, version)
    if not active:
        return StopDecision(
            version,
            False,
            f"no processor of job {store.job_name} runs job model v{version}: nothing to stop",
        )
    existing = store.stop_request()
    if existing and existing.get("version") == version:
        return StopDecision(
            version,
            True,
            f"stop of job {store.job_name} v{version} already "
            f"requested at {existing.get('requested_at')}",
        )
    store.request_stop(version, reason)
    return StopDecision(
        version,
        True,
        f"requested stop of job {store.job_name} v{version} "
        f"({reason}); processors: {describe_processors(active)}",
    )


def record_stopped(
    store: CoordinatorStore, expansion_id: str | None, result: dict[str, Any], lease: Lease | None
) -> None:
    record_step(store, expansion_id, "stop", S.JOB_STOPPED, result, lease)


# -- write job model vN+1 --------------------------------------------------------------------


def model_summary(model: JobModel, *, written: bool) -> dict[str, Any]:
    return {
        "job_name": model.job_name,
        "version": model.version,
        "written": written,
        "counts": model.partition_counts(),
        "tasks": len(model.tasks()),
        "created_by": model.created_by,
    }


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
        grown = {s: n for s, n in planned.items() if n != int(record.plan["counts_before"][s])}
        if targets != grown:
            raise InvalidGrowthError(
                f"live partition counts {live} do not match expansion {expansion_id!r} "
                f"(planned {planned}) - run ExpandPartitionsOperator first"
            )
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
    record_step(store, expansion_id, "write", S.JOB_MODEL_WRITTEN, summary, lease)
    return summary


def _already_written(
    store: CoordinatorStore,
    latest: JobModel,
    record: ExpansionRecord,
    writer: str,
    lease: Lease | None,
) -> dict[str, Any]:
    """The newest model is past the plan's base: this expansion's vN+1 (no-op) or another's."""
    planned = {s: int(n) for s, n in record.plan["counts_after"].items()}
    noted = (record.results.get("write") or {}).get("version")
    ours = latest.version == record.target_version and (
        noted == latest.version
        or (latest.created_by in (writer, record.owner) and latest.partition_counts() == planned)
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
        record_step(store, record.expansion_id, "write", S.JOB_MODEL_WRITTEN, summary, lease)
    return summary


# -- submit bookkeeping ----------------------------------------------------------------------


@dataclass(frozen=True)
class SubmitDecision:
    """``launch`` False: the job already runs the new model (``running`` says who)."""

    launch: bool
    version: int | None
    running: list[str] = field(default_factory=list)
    earlier: dict[str, Any] = field(default_factory=dict)
    message: str = ""


def before_submit(
    store: CoordinatorStore,
    expansion_id: str | None,
    *,
    continuous: bool,
    is_running: Any = None,
) -> SubmitDecision:
    """Whether to launch: a continuous job that already runs the newest model (a fresh
    heartbeat, a live standby of it, or the launch of an earlier try or of the handover's
    standby still alive per ``is_running(handle)``) is not launched twice. Clears a stop
    request left for the version about to start."""
    latest = store.latest_job_model()
    version = latest.version if latest is not None else None
    processors = store.processors()
    running = sorted(
        pid
        for pid, p in processors.items()
        if p.get("job_model_version") == version
        and p.get("state") in ("starting", "running")
        and is_alive(p)
    )
    # A live standby of the new model (the handover's, `protocol.handover`) takes over itself.
    running += [
        f"{pid} (standby)"
        for pid in standbys(processors)
        if processors[pid].get("job_model_version") == version
    ]
    earlier: dict[str, Any] = {}
    launched: list[Any] = []
    if expansion_id:
        results = records.begin(store, expansion_id, "submit").results
        earlier = dict(results.get("submit") or {})
        launched = list((results.get("standby") or {}).get("launches") or ())
    if earlier.get("detached") and is_running is not None and is_running(earlier):
        running.append(f"pid {earlier['pid']} (launched by an earlier try)")
    running += [
        f"pid {h['pid']} (standby launched by the handover)"
        for h in launched
        if is_running is not None and isinstance(h, dict) and "pid" in h and is_running(h)
    ]
    if running and continuous:
        return SubmitDecision(
            False,
            version,
            running,
            earlier,
            f"job {store.job_name} already "
            f"runs job model v{version} ({', '.join(running)}): not launching "
            "it twice",
        )
    stop = store.stop_request()
    if stop and version is not None and int(stop.get("version", 0)) >= version:
        # A stop for the version we start (left by an earlier stop of a rerun) would stop the
        # restarted job at once; the job it meant has stopped.
        log.info("Clearing the stop request %s before the launch.", stop)
        store.clear_stop()
    return SubmitDecision(
        True, version, running, earlier, f"launching job {store.job_name} on job model v{version}"
    )


def record_step(
    store: CoordinatorStore,
    expansion_id: str | None,
    step: str,
    status: ExpansionStatus | None,
    result: Any,
    lease: Lease | None,
) -> ExpansionRecord | None:
    """Note a step's end and result (submit: the redacted handle; ack: who runs vN+1)."""
    if not expansion_id:
        return None
    return records.update(
        store, expansion_id, lambda r: records.mark(r, step, status, result=result), fence=lease
    )


def complete(
    store: CoordinatorStore, expansion_id: str, summary: dict[str, Any], lease: Lease | None
) -> ExpansionRecord:
    """Mark the expansion completed (the report step) with its timing summary."""
    return record_step(store, expansion_id, "report", S.COMPLETED, summary, lease)  # type: ignore[return-value]


__all__ = [
    "StopDecision",
    "SubmitDecision",
    "before_submit",
    "complete",
    "model_summary",
    "record_step",
    "record_stopped",
    "request_stop",
    "write_job_model",
]
