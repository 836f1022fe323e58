"""The submit step's expansion bookkeeping: launch vN+1 once (`before_submit`: not twice for a
continuous job that already runs it, nor over a live standby of the warm handover), then note
the launch (`record_submitted`: the redacted handle is the step's result). The launch itself is
the runtime's (`_protocol.job.launch`, spark-submit)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_samza_expand._protocol import records
from airflow_samza_expand._protocol.job import launches
from airflow_samza_expand._protocol.restart import RestartChoice
from airflow_samza_expand.core._lease import Lease
from airflow_samza_expand.core._liveness import is_alive, standbys
from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus
from airflow_samza_expand.store import CoordinatorStore

log = logging.getLogger(__name__)


def submit_handle(record: ExpansionRecord) -> dict[str, Any]:
    """``results["submit"]``: the (redacted) handle of the launch an earlier try made, or {}."""
    doc = record.results.get("submit")
    return dict(doc) if isinstance(doc, Mapping) else {}


def record_submitted(
    store: CoordinatorStore, expansion_id: str | None, handle: Any, lease: Lease | None
) -> ExpansionRecord | None:
    """The submit step's end, with the redacted launch handle as its result."""
    return records.record_step(
        store, expansion_id, "submit", ExpansionStatus.SUBMITTED, handle, lease
    )


@dataclass(frozen=True)
class SubmitDecision:
    """``launch`` False: the job already runs the new model (``running`` says who), or an
    earlier launch may still come up (``wait_s`` > 0: judge again after a while)."""

    launch: bool
    version: int | None
    running: list[str] = field(default_factory=list)
    earlier: dict[str, Any] = field(default_factory=dict)
    message: str = ""
    wait_s: float = 0.0


def before_submit(
    store: CoordinatorStore,
    expansion_id: str | None,
    *,
    continuous: bool,
    sleep: Callable[[float], None] = time.sleep,
    poll_s: float = 2.0,
) -> SubmitDecision:
    """Whether to launch: a continuous job that already runs the newest model (a fresh
    heartbeat, a live standby of it) is not launched twice. The launch an earlier try (or the
    handover's standby step) noted in the
    record (on any worker) is judged by `_protocol.job.launches.judge`: while it may still come up
    this waits (``poll_s`` between looks); it launches again only once that launch is gone.
    Clears a stop request left for the version about to start. Logs why it launches or not."""
    while True:
        decision = _decide(store, expansion_id, continuous=continuous)
        log.info("%s", decision.message)
        if decision.wait_s <= 0:
            return decision
        sleep(min(poll_s, decision.wait_s))


def _decide(
    store: CoordinatorStore,
    expansion_id: str | None,
    *,
    continuous: bool,
) -> SubmitDecision:
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
    # A live standby of the new model (the warm restart's) takes over itself.
    running += [
        f"{pid} (standby)"
        for pid in standbys(processors)
        if processors[pid].get("job_model_version") == version
    ]
    earlier: dict[str, Any] = {}
    facts: dict[str, Any] | None = None
    if expansion_id:
        record = records.require(store, expansion_id)
        # before anything is written or launched: vN+1 must be written
        records.check_reachable(record, ExpansionStatus.SUBMITTED, "submit")
        record = records.begin(store, expansion_id, "submit", record=record)
        switch = RestartChoice.of_record(record)
        if switch is not None and not switch.strategy.submits_job and continuous:
            # in place or in-app: the running application takes vN+1 itself; Airflow launches
            # nothing
            message = switch.nothing_to_do(version, "launching nothing")
            return SubmitDecision(False, version, running, {}, message)
        earlier = submit_handle(record)
        facts = launches.facts_of(record) or ({**earlier} if earlier.get("detached") else None)
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
    if continuous and facts:
        view = launches.judge(facts, processors, version)
        if view.state == launches.UP:
            message = f"job {store.job_name} already runs job model v{version} ({view.reason})"
            return SubmitDecision(False, version, [view.reason], earlier, message)
        if view.state == launches.STARTING:
            message = f"not launching job {store.job_name} yet: {view.reason}"
            return SubmitDecision(False, version, [], earlier, message, view.wait_s)
        log.info("Launching again: %s.", view.reason)
    stop = store.stop_request()
    if stop and version is not None and int(stop.get("version", 0)) >= version:
        # A stop for the version we start (left by an earlier stop of a rerun) would stop the
        # restarted job at once; the job it meant has stopped.
        log.info("Clearing the stop request %s before the launch.", stop)
        store.clear_stop()
    return SubmitDecision(
        True, version, running, earlier, f"launching job {store.job_name} on job model v{version}"
    )


__all__ = ["SubmitDecision", "before_submit", "record_submitted", "submit_handle"]
