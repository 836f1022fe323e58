"""What a restart strategy is (docs/design.md 'How a restart is chosen'): one object saying how it
is chosen from the running processors' capabilities and what each step of the chain does for it. The
steps, the factory, the UI and the report ask the chosen strategy; none compares mode names.

A strategy is chosen for an expansion by `_protocol.restart.choose_restart`, which walks the
registry (`_protocol.restart.registry`) in order and takes the first that `fits`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_samza_expand.core.errors import ExpansionError


@dataclass(frozen=True)
class Context:
    """What a choice is made from: the live processors of the running job model (their
    `core._liveness.ProcessorStatus`), its version, whether the user supplied a restart task,
    the restart asked for (``auto`` or a mode), and whether the DAG owns launching the job
    (``launches``: it names an application or a restart task; else only a strategy that
    launches nothing fits)."""

    live: Sequence[Any]
    version: int
    restart_task: bool
    requested: str
    launches: bool = True

    @property
    def who(self) -> str:
        return ", ".join(sorted(s.processor_id for s in self.live))

    def unable(self, capability: str) -> list[str]:
        """The live processors that do not advertise ``capability`` (ids, sorted)."""
        return sorted(s.processor_id for s in self.live if not s.can(capability))


@dataclass(frozen=True)
class RestartStrategy:
    """One restart strategy. The booleans are what the steps ask:

    * ``launches_standby`` - standby step: launch vN+1 as a standby during the grace;
    * ``stops_job`` - stop step: ask vN to stop before vN+1 is written;
    * ``submits_job`` - submit step: start vN+1 (spark-submit, or the user's ``restart_task``
      with ``user_task``) unless one runs already;
    * ``waits_for_drain`` - barrier: hold until the job's group passed the snapshot H (False:
      the job gates the new partitions itself, per parent).

    Choice: ``capability`` is what every live processor of vN must advertise (None: nothing);
    ``needs_live`` - ``auto`` takes it only when some processor of vN is alive;
    ``needs_task`` - only when the user supplied a restart task; a strategy that launches
    (`launches_nothing` False) only when the DAG owns launching. ``fits_reason`` and
    ``refusal`` are the texts of a choice and of an explicit request that cannot be met."""

    mode: str
    summary: str  # one clause for the error listing the modes
    launches_standby: bool
    stops_job: bool
    submits_job: bool
    waits_for_drain: bool
    capability: str | None = None
    needs_live: bool = True
    needs_task: bool = False
    user_task: bool = False
    # "{who}" / "{version}" / "{unable}" are filled in
    fits_reason: str = ""
    refusal: str = ""
    # what a step that has nothing to do for this strategy logs
    idle: str = ""
    # who the ack step waits for (its log while it waits)
    acknowledged_by: str = ""

    @property
    def launches_nothing(self) -> bool:
        """Airflow launches nothing and stops nothing: the running application takes vN+1
        itself."""
        return not (self.launches_standby or self.stops_job or self.submits_job)

    # choice ----------------------------------------------------------------------------------

    def fits(self, ctx: Context) -> str | None:
        """The reason ``auto`` takes this strategy, or None when it does not fit."""
        if self.needs_task and not ctx.restart_task:
            return None
        if not (ctx.launches or self.launches_nothing):
            return None
        if self.needs_live and not ctx.live:
            return None
        if self.capability is not None and ctx.unable(self.capability):
            return None
        return self.reason(ctx)

    def reason(self, ctx: Context, unable: Sequence[str] = ()) -> str:
        return self.fits_reason.format(
            who=ctx.who, version=ctx.version, unable=", ".join(unable), mode=self.mode
        )

    def explicit(self, ctx: Context) -> str:
        """The reason when it was asked for by name; ExpansionError when the job cannot."""
        if self.needs_task and not ctx.restart_task:
            raise ExpansionError(
                f"restart={self.mode!r} needs the restart task the user supplies "
                "(RestartSettings(task=...)) - give one, or use restart='auto'"
            )
        if not (ctx.launches or self.launches_nothing):
            raise ExpansionError(
                f"restart={self.mode!r} launches the job, but this DAG names no application "
                "and no restart task - name how to launch it (SparkSettings(application=...) "
                "or RestartSettings(task=...)), or use restart='auto'"
            )
        if self.capability is None:
            return f"restart={self.mode!r} was asked for"
        if not ctx.live:
            return f"restart={self.mode!r} was asked for; no live processor of v{ctx.version}"
        unable = ctx.unable(self.capability)
        if unable:
            raise ExpansionError(
                self.refusal.format(unable=", ".join(unable), version=ctx.version, mode=self.mode)
            )
        return self.reason(ctx)

    # what the steps log ----------------------------------------------------------------------

    def nothing_to_do(self, reason: str, version: int | None, what: str) -> str:
        """The line a step logs when this strategy gives it nothing to do (``what``: the
        step's own words, e.g. "nothing to stop")."""
        does = self.idle.format(version=version) if self.idle else "not this step's work"
        return f"{self.mode} restart ({reason}): {does} - {what}"


__all__ = ["Context", "RestartStrategy"]
