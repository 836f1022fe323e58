"""The stop step: write the ``stop`` control record for the running version (its newest job
model), once, and wait until no live processor of it runs (`stop_poll`: the wait's one
implementation). Dead processors (silent past their TTL) are never waited for. Its
result in the record is `StopResult`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_samza_expand._protocol import records
from airflow_samza_expand._protocol.poll import Poll
from airflow_samza_expand._protocol.processors import (
    active_processors,
    describe_processors,
    reap_dead,
)
from airflow_samza_expand._protocol.restart import RestartChoice
from airflow_samza_expand._protocol.steps.results import StopResult
from airflow_samza_expand.core._lease import Lease
from airflow_samza_expand.core._record import ExpansionStatus
from airflow_samza_expand.store import CoordinatorStore

S = ExpansionStatus
DEFAULT_STOP_TIMEOUT_S = 600.0  # for the running processors to stop
DEFAULT_STANDBY_WARM_TIMEOUT_S = 600.0  # warm restart: for the vN+1 standby to be warm


@dataclass(frozen=True)
class StopDecision:
    """What the stop step does: nothing (``version`` None or nothing running) or wait."""

    version: int | None
    requested: bool
    message: str


def begin(store: CoordinatorStore, expansion_id: str, lease: Lease | None = None) -> None:
    """The stop step's start, once the record may become ``job-stopped`` (the barrier passed):
    a record an earlier step left behind is refused (InvalidTransitionError) before anything
    is written or stopped."""
    record = records.require(store, expansion_id)
    records.check_reachable(record, S.JOB_STOPPED, "stop")
    records.begin(store, expansion_id, "stop", fence=lease, record=record)


def request_stop(
    store: CoordinatorStore, reason: str, *, expansion_id: str | None = None
) -> StopDecision:
    """Write the ``stop`` control record for the running version (newest model), once; with
    an expansion only once its record may become ``job-stopped`` (`begin`).

    After the expansion wrote vN+1, nothing is stopped: the job that had to stop did, and a job
    running vN+1 is the restarted one."""
    if expansion_id:
        begin(store, expansion_id)
    latest = store.latest_job_model()
    version = latest.version if latest is not None else None
    if expansion_id and latest is not None:
        record = records.require(store, expansion_id)
        switch = RestartChoice.of_record(record)
        if switch is not None and not switch.strategy.stops_job:
            return StopDecision(
                None, False, switch.nothing_to_do(record.target_version, "nothing to stop")
            )
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
    store: CoordinatorStore,
    expansion_id: str | None,
    result: StopResult | Mapping[str, Any],
    lease: Lease | None,
) -> None:
    """The stop step's end and `StopResult` in the record."""
    stopped = StopResult.from_dict(result) if isinstance(result, Mapping) else result
    records.record_step(store, expansion_id, "stop", S.JOB_STOPPED, stopped.to_dict(), lease)


def stop_poll(store: CoordinatorStore, version: int | None) -> Poll:
    """Done once no live processor of `version` is starting, running or stopping; dead ones
    (silent past their TTL) are not waited for and their records are removed."""
    dead = reap_dead(store)
    gone = f" (dead, not waited for and removed: {', '.join(dead)})" if dead else ""
    waiting = active_processors(store, version)
    if waiting:
        return Poll(
            False,
            f"waiting for {len(waiting)} processor(s) of job {store.job_name} v{version} to "
            f"stop: {describe_processors(waiting)}{gone}",
        )
    stopped = sorted(
        pid for pid, p in store.processors().items() if p.get("job_model_version") == version
    )
    return Poll(
        True, f"all processors of v{version} stopped: {stopped}{gone}", {"stopped": stopped}
    )


__all__ = ["StopDecision", "begin", "record_stopped", "request_stop", "stop_poll"]
