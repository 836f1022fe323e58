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
  (`protocol.steps.standby`), stop vN, write vN+1; the submit step launches nothing while a live
  processor of vN+1 exists (`protocol.steps.submit.before_submit`); the acknowledgement waits until
  it is active on vN+1.
* ``"cold"``: stop vN, write vN+1, then start vN+1 (a whole Spark start of downtime).

Available-now mode is always cold: no run is in progress to hand over from.

A *hot standby* is one more processor of the new job model kept waiting for the lease: when
the active dies the standby takes over once the broker expires the dead member's session.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_samza_expand.core.errors import ExpansionError
from airflow_samza_expand.core.liveness import CAPABILITY_STANDBY, WORKING_STATES, statuses

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


__all__ = [
    "AUTO",
    "COLD",
    "RestartChoice",
    "choose_restart",
    "HANDOVER_MODES",
    "LAUNCH_STEPS",
    "WARM",
    "normalise_handover",
]
