"""The handover restart of an expansion (DESIGN rule 1.7): the vN+1 processor is launched as a
standby while vN still runs, takes the job's active lease once vN released it after its last
committed batch, and starts on vN+1 (it never processes an older job model).

Restart modes (``handover``):

* ``"auto"`` (default; rule 1.8): ``"warm"`` when every live processor of vN advertises the
  standby capability in its heartbeat (the shipped job and `spark.runtime` do), else
  ``"cold"`` with the reason logged: never launch a second instance of an application that has
  not said it can wait as a standby. The plan step chooses (`choose_restart`) and records the
  choice in the expansion record; the standby and stop steps follow it.
* ``"warm"``: launch the vN+1 standby during the producer grace
  (`before_standby`), stop vN, write vN+1; the submit step launches nothing while a live
  processor of vN+1 exists (`protocol.restart.before_submit`); the acknowledgement waits until
  it is active on vN+1.
* ``"cold"``: stop vN, write vN+1, then start vN+1 (a whole Spark start of downtime).

Available-now mode is always cold: no run is in progress to hand over from.

A *hot standby* is one more processor of the new job model kept waiting for the lease: when
the active dies the standby takes over once the broker expires the dead member's session.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_samza_expand.core.errors import ExpansionError
from airflow_samza_expand.core.lease import Lease
from airflow_samza_expand.core.liveness import CAPABILITY_STANDBY, WORKING_STATES, statuses
from airflow_samza_expand.protocol import records
from airflow_samza_expand.protocol.restart import record_step
from airflow_samza_expand.store import CoordinatorStore

log = logging.getLogger(__name__)

AUTO = "auto"
WARM = "warm"
COLD = "cold"
HANDOVER_MODES = (AUTO, WARM, COLD)
# Steps of the expansion record whose result may hold a detached launch of the new model.
LAUNCH_STEPS = ("standby", "submit", "hot_standby")


def normalise_handover(value: Any, *, error: type[Exception] = ExpansionError) -> str:
    """``auto``, ``warm`` or ``cold``; a clear ``error`` naming the values otherwise."""
    mode = str(value).strip().lower()
    if mode not in HANDOVER_MODES:
        raise error(
            f"handover={value!r} is not known - use 'warm' (start the new job model's "
            "processor as a standby before the old one stops: the job is down for the switch "
            "only), 'cold' (stop, then start: down for a whole Spark start) or 'auto' (the "
            "default: warm when the running job says it can be a standby, else cold)"
        )
    return mode


@dataclass(frozen=True)
class RestartChoice:
    """The restart an expansion uses (rule 1.8), as recorded in the plan's result."""

    mode: str  # WARM or COLD
    requested: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"mode": self.mode, "requested": self.requested, "reason": self.reason}

    @classmethod
    def of_record(cls, record: Any) -> RestartChoice | None:
        """The choice kept in an expansion record (None: the plan made none)."""
        doc = ((record.results.get("plan") or {}) if record is not None else {}).get("restart")
        if not isinstance(doc, Mapping) or doc.get("mode") not in (WARM, COLD):
            return None
        return cls(str(doc["mode"]), str(doc.get("requested", "")), str(doc.get("reason", "")))


def choose_restart(
    processors: Mapping[str, Mapping[str, Any]], version: int, requested: str
) -> RestartChoice:
    """Rule 1.8: warm only when every live processor of job model ``version`` advertises the
    standby capability. ``requested="warm"`` for a job that does not is refused
    (ExpansionError naming the processors); ``"auto"`` then chooses cold."""
    requested = normalise_handover(requested)
    if requested == COLD:
        return RestartChoice(COLD, requested, "handover='cold' was asked for")
    live = [
        s
        for s in statuses(processors).values()
        if s.job_model_version == version and s.state in WORKING_STATES and s.alive()
    ]
    unable = sorted(s.processor_id for s in live if not s.can(CAPABILITY_STANDBY))
    if unable:
        if requested == WARM:
            raise ExpansionError(
                f"handover='warm' needs a job that can wait as a standby, but processor(s) "
                f"{', '.join(unable)} of v{version} do not advertise the 'standby' capability in "
                "their heartbeat (rule 1.8): launching a second instance would run the job "
                "twice - use handover='auto' or 'cold', or build the job on "
                "airflow_samza_expand.spark.runtime"
            )
        return RestartChoice(
            COLD,
            requested,
            f"processor(s) {', '.join(unable)} of v{version} do not advertise the 'standby' "
            "capability: a cold restart (stop, write, start) never runs two instances",
        )
    if not live:
        if requested == WARM:
            reason = f"handover='warm' was asked for; no live processor of v{version}"
            return RestartChoice(WARM, requested, reason)
        return RestartChoice(
            COLD, requested, f"no live processor of v{version}: nothing to hand over from"
        )
    who = ", ".join(sorted(s.processor_id for s in live))
    return RestartChoice(
        WARM, requested, f"every live processor of v{version} ({who}) can be a standby"
    )


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
    if choice is not None and choice.mode == COLD:
        return StandbyDecision(
            0, version, [], f"cold restart ({choice.reason}): launching no standby"
        )
    live = live_processors(store.processors(), version)
    handles = [
        handle
        for step in LAUNCH_STEPS
        for handle in _handles(record.results.get(step))
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


def _handles(result: Any) -> list[Mapping[str, Any]]:
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
    earlier = list((record.results.get(step) or {}).get("launches") or ())
    record_step(store, expansion_id, step, None, {"launches": [*earlier, *launches]}, lease)


__all__ = [
    "AUTO",
    "COLD",
    "RestartChoice",
    "choose_restart",
    "HANDOVER_MODES",
    "LAUNCH_STEPS",
    "WARM",
    "StandbyDecision",
    "before_standby",
    "live_processors",
    "normalise_handover",
    "record_launches",
    "standby_args",
]
