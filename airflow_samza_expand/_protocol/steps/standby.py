"""The standby step of a warm handover: launch the vN+1 processor as a standby while vN still
runs (`before_standby` says how many, from the record and the heartbeats; `standby_args` how),
each launch noted in the record before it starts (`_protocol.job.launches`, as the submit step
does), the handles after (`StandbyResult`, under ``results["standby"]`` or
``["hot_standby"]``), and wait until one is warm (`standby_poll`: the stop step waits for it,
so the switch is short). The restart choice itself is `_protocol.restart.choose_restart`."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_samza_expand._protocol import records
from airflow_samza_expand._protocol.job import launches
from airflow_samza_expand._protocol.poll import Poll
from airflow_samza_expand._protocol.processors import describe_processors
from airflow_samza_expand._protocol.restart import RestartChoice
from airflow_samza_expand._protocol.steps.results import StandbyResult
from airflow_samza_expand.core._lease import Lease
from airflow_samza_expand.core._liveness import WORKING_STATES, statuses
from airflow_samza_expand.store import CoordinatorStore

log = logging.getLogger(__name__)


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
    """``launch``: how many processors of job model ``version`` to start now (0: enough run);
    ``wait_s`` > 0: an earlier try's launch may still come up - judge again after a while."""

    launch: int
    version: int
    live: list[str] = field(default_factory=list)
    message: str = ""
    wait_s: float = 0.0


def before_standby(
    store: CoordinatorStore,
    expansion_id: str,
    *,
    processors: int = 1,
    step: str = "standby",
    sleep: Callable[[float], None] = time.sleep,
    poll_s: float = 2.0,
) -> StandbyDecision:
    """How many standbys of the expansion's vN+1 to launch so that ``processors`` of it exist.

    Counted from the record and the heartbeats, alike on every worker: the live processors of
    vN+1 and the launch an earlier try of ``step`` noted in the record
    (`_protocol.job.launches`), which may not heartbeat yet (a JVM start). While that launch
    may still come up and would be one too many, this waits (``poll_s`` between looks); it is
    launched again only once it is gone. Logs why it launches or not."""
    while True:
        decision = _decide(store, expansion_id, processors=processors, step=step)
        log.info("%s", decision.message)
        if decision.wait_s <= 0:
            return decision
        sleep(min(poll_s, decision.wait_s))


def _decide(
    store: CoordinatorStore, expansion_id: str, *, processors: int, step: str
) -> StandbyDecision:
    record = records.require(store, expansion_id)
    version = record.target_version
    choice = RestartChoice.of_record(record)
    if choice is not None and not choice.strategy.launches_standby:
        return StandbyDecision(
            0, version, [], f"{choice.restart} restart ({choice.reason}): launching no standby"
        )
    beats = store.processors()
    live = live_processors(beats, version)
    facts = launches.facts_of(record)
    view = launches.judge(facts, beats, version) if facts and facts.get("step") == step else None
    if view is not None and view.state == launches.STARTING:
        message = f"not launching a standby of job {store.job_name} v{version} yet: "
        return StandbyDecision(0, version, live, message + view.reason, view.wait_s)
    missing = max(int(processors) - len(live), 0)
    who = ", ".join(live) or "none heartbeating"
    if not missing:
        message = (
            f"{len(live)} processor(s) of job {store.job_name} v{version} exist ({who}): "
            "launching no standby"
        )
    else:
        again = f" ({view.reason})" if view is not None and view.state == launches.GONE else ""
        message = f"launching {missing} standby processor(s) of job {store.job_name} v{version}"
        message += again
    return StandbyDecision(missing, version, live, message)


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
    "live_processors",
    "record_launches",
    "standby_args",
    "standby_poll",
]
