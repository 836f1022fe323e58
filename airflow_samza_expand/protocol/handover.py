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

* ``"in-place"`` (rule 1.9): the running processor reads vN+1 from a micro-batch boundary
  itself (the provider's reader), gating each child partition by its parent's snapshot: plan ->
  expand -> grace and snapshot -> write vN+1 -> ack (running on vN+1) -> report. The barrier
  does not wait for the job to drain (the job gates per parent); the stop, standby and submit
  steps do nothing. ``"auto"`` chooses it when every live processor of vN advertises the
  ``in-place`` capability.

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
from airflow_samza_expand.core.liveness import (
    CAPABILITY_IN_PLACE,
    CAPABILITY_STANDBY,
    WORKING_STATES,
    statuses,
)

log = logging.getLogger(__name__)

AUTO = "auto"
WARM = "warm"
COLD = "cold"
IN_PLACE = "in-place"
HANDOVER_MODES = (AUTO, IN_PLACE, WARM, COLD)
# Steps of the expansion record whose result may hold a detached launch of the new model.
LAUNCH_STEPS = ("standby", "submit", "hot_standby")


def normalise_handover(value: Any, *, error: type[Exception] = ExpansionError) -> str:
    """``auto``, ``in-place``, ``warm`` or ``cold``; a clear ``error`` naming the values
    otherwise."""
    mode = str(value).strip().lower()
    if mode not in HANDOVER_MODES:
        raise error(
            f"handover={value!r} is not known - use 'in-place' (the running job switches to the "
            "new job model at a batch boundary: no restart), 'warm' (start the new job model's "
            "processor as a standby before the old one stops: the job is down for the switch "
            "only), 'cold' (stop, then start: down for a whole Spark start) or 'auto' (the "
            "default: in-place, else warm, else cold, from what the running job says it can do)"
        )
    return mode


@dataclass(frozen=True)
class RestartStrategy:
    """What one restart strategy does at the chain's steps: the steps ask it, never the mode
    string (DESIGN section 2)."""

    mode: str
    launches_standby: bool  # standby step: launch vN+1 as a standby during the grace
    stops_job: bool  # stop step: ask vN to stop before vN+1 is written
    submits_job: bool  # submit step: launch vN+1 unless one runs already
    waits_for_drain: bool  # barrier: hold until the job's group passed the snapshot H


STRATEGIES = {
    # rule 1.9: the running job reads vN+1 at a batch boundary, a child only past H[parent]
    IN_PLACE: RestartStrategy(IN_PLACE, False, False, False, False),
    # rule 1.7: vN+1 waits as a standby, takes the active lease once vN stopped
    WARM: RestartStrategy(WARM, True, True, True, True),
    COLD: RestartStrategy(COLD, False, True, True, True),  # stop, write, start
}


@dataclass(frozen=True)
class RestartChoice:
    """The restart an expansion uses (rule 1.8), as recorded in the plan's result."""

    mode: str  # IN_PLACE, WARM or COLD
    requested: str
    reason: str

    @property
    def strategy(self) -> RestartStrategy:
        return STRATEGIES[self.mode]

    def to_dict(self) -> dict[str, str]:
        return {"mode": self.mode, "requested": self.requested, "reason": self.reason}

    @classmethod
    def of_record(cls, record: Any) -> RestartChoice | None:
        """The choice kept in an expansion record (None: the plan made none)."""
        doc = ((record.results.get("plan") or {}) if record is not None else {}).get("restart")
        if not isinstance(doc, Mapping) or doc.get("mode") not in (IN_PLACE, WARM, COLD):
            return None
        return cls(str(doc["mode"]), str(doc.get("requested", "")), str(doc.get("reason", "")))


def choose_restart(
    processors: Mapping[str, Mapping[str, Any]], version: int, requested: str
) -> RestartChoice:
    """Rule 1.8: in-place when every live processor of job model ``version`` advertises the
    in-place capability, else warm when every one advertises standby, else cold. An explicit
    ``"in-place"`` or ``"warm"`` for a job that cannot is refused (ExpansionError naming the
    processors); ``"auto"`` then falls back."""
    requested = normalise_handover(requested)
    if requested == COLD:
        return RestartChoice(COLD, requested, "handover='cold' was asked for")
    live = [
        s
        for s in statuses(processors).values()
        if s.job_model_version == version and s.state in WORKING_STATES and s.alive()
    ]
    who = ", ".join(sorted(s.processor_id for s in live))
    if not live:
        if requested in (WARM, IN_PLACE):
            reason = f"handover={requested!r} was asked for; no live processor of v{version}"
            return RestartChoice(requested, requested, reason)
        return RestartChoice(
            COLD, requested, f"no live processor of v{version}: nothing to hand over from"
        )
    unable = _unable(live, CAPABILITY_IN_PLACE)
    if not unable and requested in (AUTO, IN_PLACE):
        return RestartChoice(
            IN_PLACE, requested, f"every live processor of v{version} ({who}) can switch in place"
        )
    if requested == IN_PLACE:
        raise ExpansionError(
            f"handover='in-place' needs a job that can switch to a new job model while it runs, "
            f"but processor(s) {', '.join(unable)} of v{version} do not advertise the "
            "'in-place' capability in their heartbeat (rule 1.8; Spark's own Kafka source "
            "cannot change assign in a running query) - use handover='auto', 'warm' or 'cold', "
            "or read with Job.read_kafka(source='python')"
        )
    unable = _unable(live, CAPABILITY_STANDBY)
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
    return RestartChoice(
        WARM, requested, f"every live processor of v{version} ({who}) can be a standby"
    )


def _unable(live: list[Any], capability: str) -> list[str]:
    return sorted(s.processor_id for s in live if not s.can(capability))


def strategy_of(record: Any) -> RestartStrategy | None:
    """The strategy the record's plan chose (None: the plan chose none)."""
    choice = RestartChoice.of_record(record)
    return None if choice is None else choice.strategy


def waits_for_drain(record: Any) -> bool:
    """Whether the barrier holds until the job's group passed the snapshot: always, unless the
    plan chose a strategy whose job gates new partitions itself (in place, rule 1.9)."""
    strategy = strategy_of(record)
    return strategy is None or strategy.waits_for_drain


def in_place(record: Any) -> RestartChoice | None:
    """The record's choice when it is the switch in place (rule 1.9), else None."""
    choice = RestartChoice.of_record(record)
    return choice if choice is not None and choice.mode == IN_PLACE else None


__all__ = [
    "AUTO",
    "COLD",
    "RestartChoice",
    "RestartStrategy",
    "STRATEGIES",
    "choose_restart",
    "strategy_of",
    "waits_for_drain",
    "in_place",
    "HANDOVER_MODES",
    "IN_PLACE",
    "LAUNCH_STEPS",
    "WARM",
    "normalise_handover",
]
