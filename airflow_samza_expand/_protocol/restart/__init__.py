"""The restart of an expansion, in one home (docs/design.md 'The restarts'): one object per
strategy (`in_place`, `in_app`, `task`, `warm`, `cold`, each a `RestartStrategy`), registered
in order in `registry`. The plan step chooses (`choose_restart`, from the running processors'
capabilities) and records the choice in the expansion record (`RestartChoice`); the standby,
stop, submit, barrier and ack steps, the factory, the UI and the report ask the chosen strategy
(`strategy_of`).

Requested restarts (``handover``): ``"auto"`` (default) takes the first strategy of the
registry that fits - in place, in-app, the user's restart task (when one is supplied), warm,
cold; a mode by name takes that one or refuses (ExpansionError naming the processors that
cannot). Available-now mode is always cold: no run is in progress to hand over from. A DAG that
owns no launch (it names no application and no restart task) gets only a strategy that
launches nothing (in place, in-app), or a refusal naming the processors and the fix.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_samza_expand._protocol.restart.registry import STRATEGIES
from airflow_samza_expand._protocol.restart.strategy import Context, RestartStrategy
from airflow_samza_expand.core._liveness import WORKING_STATES, statuses
from airflow_samza_expand.core.errors import ExpansionError

if TYPE_CHECKING:
    from airflow_samza_expand.core._record import ExpansionRecord

log = logging.getLogger(__name__)

AUTO = "auto"
# Steps of the expansion record whose result may hold a detached launch of the new model.
LAUNCH_STEPS = ("standby", "submit", "hot_standby")


def modes() -> tuple[str, ...]:
    """``auto`` and every registered mode, in the registry's order."""
    return (AUTO, *STRATEGIES)


def normalise_restart(value: Any, *, error: type[Exception] = ExpansionError) -> str:
    """``auto`` or a registered mode; a clear ``error`` naming each one otherwise."""
    mode = str(value).strip().lower()
    if mode not in modes():
        known = ", ".join(f"{m!r} ({s.summary})" for m, s in STRATEGIES.items())
        raise error(
            f"restart={value!r} is not known - use {known} or 'auto' (the default: the first "
            f"of {', '.join(STRATEGIES)} the running job can do, from what it says it can do)"
        )
    return mode


def strategy_named(mode: str) -> RestartStrategy:
    """The registered strategy ``mode`` (KeyError: none)."""
    return STRATEGIES[mode]


@dataclass(frozen=True)
class RestartChoice:
    """The restart an expansion uses, as recorded in the plan's result."""

    restart: str  # the chosen strategy's name; its key in the record stays "mode"
    requested: str
    reason: str

    @property
    def strategy(self) -> RestartStrategy:
        return STRATEGIES[self.restart]

    def to_dict(self) -> dict[str, str]:
        return {"mode": self.restart, "requested": self.requested, "reason": self.reason}

    def nothing_to_do(self, version: int | None, what: str) -> str:
        """What a step logs when the chosen strategy gives it nothing to do (``what``: the
        step's own words, e.g. "nothing to stop")."""
        return self.strategy.nothing_to_do(self.reason, version, what)

    @classmethod
    def of_record(cls, record: ExpansionRecord | None) -> RestartChoice | None:
        """The choice kept in an expansion record (None: the plan made none)."""
        doc = ((record.results.get("plan") or {}) if record is not None else {}).get("restart")
        if not isinstance(doc, Mapping) or doc.get("mode") not in STRATEGIES:
            return None
        return cls(str(doc["mode"]), str(doc.get("requested", "")), str(doc.get("reason", "")))


def live_processors(processors: Mapping[str, Mapping[str, Any]], version: int) -> list[Any]:
    """The live processors of job model ``version`` that still work on it (statuses)."""
    return [
        s
        for s in statuses(processors).values()
        if s.job_model_version == version and s.state in WORKING_STATES and s.alive()
    ]


def choose_restart(
    processors: Mapping[str, Mapping[str, Any]],
    version: int,
    requested: str,
    *,
    restart_task: bool = False,
    launches: bool = True,
) -> RestartChoice:
    """Capabilities (docs/design.md 'How a restart is chosen'): ``auto`` takes the first registered
    strategy that fits the live processors of job model ``version`` (in place, in-app, the user's
    task when ``restart_task``, warm, cold); a mode asked for by name is taken or refused
    (ExpansionError naming the processors that cannot). Asking for a strategy that needs the
    user's restart task says one is supplied: in place or in-app still come first (they launch
    nothing). ``launches`` False (the DAG names no application and no restart task): only a
    strategy that launches nothing, else ExpansionError naming the processors and the fix."""
    requested = normalise_restart(requested)
    live = live_processors(processors, version)
    ctx = Context(live, version, restart_task, requested, launches or restart_task)
    asked = STRATEGIES.get(requested)
    if asked is not None and asked.needs_task:
        ctx = dataclasses.replace(ctx, restart_task=True, launches=True)
    elif asked is not None:
        return RestartChoice(asked.mode, requested, asked.explicit(ctx))
    for strategy in STRATEGIES.values():
        reason = strategy.fits(ctx)
        if reason is not None:
            return RestartChoice(strategy.mode, requested, reason)
    if not ctx.launches:
        raise ExpansionError(_cannot_launch(ctx))
    raise ExpansionError(f"no restart strategy fits job model v{version} (registry: {modes()})")


def _cannot_launch(ctx: Context) -> str:
    """The refusal of a job whose live processors can neither switch in place nor restart
    in-app, for a DAG that owns no launch."""
    if not ctx.live:
        return (
            f"no live processor of job model v{ctx.version}, and this DAG names no application "
            "and no restart task, so it never launches the job - start the job, or name how to "
            "launch it: SparkSettings(application=...) or RestartSettings(task=...)"
        )
    said = "; ".join(
        f"{s.processor_id} advertises {', '.join(s.capabilities) or 'nothing'}" for s in ctx.live
    )
    return (
        f"the live processor(s) of job model v{ctx.version} can neither switch in place nor "
        f"restart in-app ({said}), and this DAG names no application and no restart task, so "
        "it cannot restart them - name how to launch the job: SparkSettings(application=...) "
        "or RestartSettings(task=...), or run it on the runtime with job.run(start)"
    )


def strategy_of(record: ExpansionRecord | None) -> RestartStrategy | None:
    """The strategy the record's plan chose (None: the plan chose none)."""
    choice = RestartChoice.of_record(record)
    return None if choice is None else choice.strategy


def waits_for_drain(record: ExpansionRecord | None) -> bool:
    """Whether the barrier holds until the job's group passed the snapshot: always, unless the
    plan chose a strategy whose job gates new partitions itself (in place)."""
    strategy = strategy_of(record)
    return strategy is None or strategy.waits_for_drain


def launches_nothing(record: ExpansionRecord | None) -> RestartChoice | None:
    """The record's choice when Airflow launches and stops nothing for it (in place, in-app:
    the running application takes vN+1 itself), else None."""
    choice = RestartChoice.of_record(record)
    return choice if choice is not None and choice.strategy.launches_nothing else None


__all__ = [
    "AUTO",
    "LAUNCH_STEPS",
    "STRATEGIES",
    "Context",
    "RestartChoice",
    "RestartStrategy",
    "choose_restart",
    "launches_nothing",
    "live_processors",
    "modes",
    "normalise_restart",
    "strategy_named",
    "strategy_of",
    "waits_for_drain",
]
