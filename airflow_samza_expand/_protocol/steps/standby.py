"""The standby step of a warm handover (DESIGN rule 1.7): launch the vN+1 processor as a
standby while vN still runs (`before_standby` says how many, `standby_args` how), note the
launches (`StandbyResult`, under ``results["standby"]`` or ``["hot_standby"]``) and wait until
one is warm (`standby_poll`: the stop step waits for it, so the switch is short). The restart
choice itself (rule 1.8) is `_protocol.restart.choose_restart`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_samza_expand._protocol import records
from airflow_samza_expand._protocol.poll import Poll
from airflow_samza_expand._protocol.processors import describe_processors
from airflow_samza_expand._protocol.restart import LAUNCH_STEPS, RestartChoice
from airflow_samza_expand._protocol.steps.results import StandbyResult
from airflow_samza_expand.core._lease import Lease
from airflow_samza_expand.core._liveness import WORKING_STATES, statuses
from airflow_samza_expand.store import CoordinatorStore


def standby_args(application_args: Sequence[Any], version: int) -> list[str]:
    """The job's arguments for a standby of job model ``version``: ``--standby
    --job-model-version <version>`` (replacing any given)."""
    out: list[str] = []
    skip = False
    for arg in map(str, application_args):
        if skip:
            skip = False
            continue
        if arg == "--job-model-version":
            skip = True
            continue
        if arg == "--standby" or arg.startswith("--job-model-version="):
            continue
        out.append(arg)
    return [*out, "--standby", "--job-model-version", str(int(version))]


def live_processors(processors: Mapping[str, Mapping[str, Any]], version: int) -> list[str]:
    """Live processors of job model ``version`` that are standby, starting or running (ids)."""
    return sorted(
        pid
        for pid, s in statuses(processors).items()
        if s.job_model_version == version and s.state in WORKING_STATES - {"stopping"} and s.alive()
    )


@dataclass(frozen=True)
class StandbyDecision:
    """``launch``: how many processors of job model ``version`` to start now (0: enough run)."""

    launch: int
    version: int
    live: list[str] = field(default_factory=list)
    message: str = ""


def before_standby(
    store: CoordinatorStore,
    expansion_id: str,
    *,
    processors: int = 1,
    is_running: Callable[[Mapping[str, Any]], bool] | None = None,
) -> StandbyDecision:
    """How many standbys of the expansion's vN+1 to launch so that ``processors`` of it exist.

    Counted: live processors of vN+1 (heartbeats) and, as they may not heartbeat yet (a JVM
    start), the detached launches of earlier tries still running; the larger of the two."""
    record = records.require(store, expansion_id)
    version = record.target_version
    choice = RestartChoice.of_record(record)
    if choice is not None and not choice.strategy.launches_standby:
        return StandbyDecision(
            0, version, [], f"{choice.mode} restart ({choice.reason}): launching no standby"
        )
    live = live_processors(store.processors(), version)
    handles = [
        handle
        for step in LAUNCH_STEPS
        for handle in launch_handles(record.results.get(step))
        if is_running is not None and is_running(handle)
    ]
    have = max(len(live), len(handles))
    missing = max(int(processors) - have, 0)
    who = ", ".join(live) or "none heartbeating"
    if not missing:
        message = (
            f"{have} processor(s) of job {store.job_name} v{version} exist ({who}; "
            f"{len(handles)} launch(es) running): launching no standby"
        )
    else:
        message = f"launching {missing} standby processor(s) of job {store.job_name} v{version}"
    return StandbyDecision(missing, version, live, message)


def launch_handles(result: Any) -> list[Mapping[str, Any]]:
    """The detached launch handles in a step result (one, or a list under ``launches``)."""
    if not isinstance(result, Mapping):
        return []
    found = [result] if result.get("detached") and "pid" in result else []
    for item in result.get("launches") or ():
        if isinstance(item, Mapping) and item.get("detached") and "pid" in item:
            found.append(item)
    return found


def record_launches(
    store: CoordinatorStore,
    expansion_id: str,
    step: str,
    launches: list[dict[str, Any]],
    lease: Lease | None,
) -> None:
    """Note the (redacted) handles of the standbys a step launched, added to earlier tries'."""
    record = records.require(store, expansion_id)
    earlier = StandbyResult.from_dict(record.results.get(step)).launches
    result = StandbyResult([*earlier, *launches])
    records.record_step(store, expansion_id, step, None, result.to_dict(), lease)


WARM_STATES = frozenset({"standby", "running"})


def standby_poll(store: CoordinatorStore, version: int) -> Poll:
    """Done once a live processor of job model `version` is warm: it heartbeats ``standby``
    (JVM, SparkSession and Python workers up, waiting for the lease) or already ``running``.
    The handover's stop step waits for it, so that the running version stops only when the
    switch is short; a standby still ``starting`` (warming up) is named while it waits."""
    processors = store.processors()
    live = {
        pid: s
        for pid, s in statuses(processors).items()
        if s.job_model_version == version and s.alive()
    }
    warm = sorted(pid for pid, s in live.items() if s.state in WARM_STATES)
    if warm:
        return Poll(True, f"job {store.job_name} v{version} has a warm processor: {warm}",
                    {"warm": warm})  # fmt: skip
    who = describe_processors({p: processors[p] for p in live}) if live else "none heartbeating"
    return Poll(
        False,
        f"waiting for the standby of job {store.job_name} v{version} to warm up (JVM, "
        f"SparkSession, Python workers) before the running version stops: {who}",
    )


__all__ = [
    "WARM_STATES",
    "StandbyDecision",
    "before_standby",
    "launch_handles",
    "live_processors",
    "record_launches",
    "standby_args",
    "standby_poll",
]
