"""The expansion protocol by step (docs/design.md 'The expansion steps'): one module per step, each
holding that step's action, its poll (the wait's one implementation, for the trigger and for poke
mode) and its typed result as kept in ``ExpansionRecord.results[<record step>]``.

* `plan` - validate, take the expansion lease, record the intent once (`PlanResult`).
* `expand` - grow each topic at most once per expansion (`ExpandResult`).
* `barrier` - its home is `_protocol.barrier` (`_protocol.barrier.step`: grace, stale
  placements, snapshot, lag drained; `GraceResult`, `SnapshotResult`).
* `standby` - the warm handover's vN+1 processor waiting for the lease (`StandbyResult`).
* `stop` - request the stop of vN and wait for it (`StopResult`).
* `write_model` - write job model vN+1 (`ModelSummary`).
* `submit` - launch vN+1 once (the handle is the result).
* `ack` - wait until vN+1 runs (`AckResult`).
* `report` - the summary, completion (`seconds_per_step` iterates `STEPS`).

`STEPS` is their order in a chain: what the report and the UI iterate.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """One step of the chain: its module (`_protocol.steps.<name>`), the factory's task id, the
    step name in the expansion record (``steps``/``results``) and the record steps whose end
    starts it (first present; for records that kept only step ends)."""

    name: str
    task_id: str
    record_step: str
    starts_after: tuple[str, ...] = ()
    phase: str | None = None  # which part of its task, when one task records two steps

    @property
    def title(self) -> str:
        """The step's name wherever people read it (the UI, the report's lines and
        ``seconds_per_step``, logs): the factory DAG's task id, with the phase when its task
        records two steps."""
        return f"{self.task_id} ({self.phase})" if self.phase else self.task_id


GRACE = "grace and snapshot"  # the barrier task's first phase
STEPS: tuple[Step, ...] = (
    Step("plan", "plan", "plan"),
    Step("expand", "expand", "expand", ("plan",)),
    Step("barrier", "barrier", "barrier_snapshot", ("expand",), GRACE),
    Step("barrier", "barrier", "barrier", ("barrier_snapshot",), "drain"),
    Step("standby", "submit_standby", "standby"),
    Step("stop", "stop_job", "stop", ("barrier",)),
    Step("write_model", "write_job_model", "write", ("stop", "barrier")),
    Step("submit", "submit", "submit", ("write",)),
    Step("ack", "ack", "ack", ("submit",)),
    Step("report", "report", "report", ("ack",)),
)


def step_named(record_step: str) -> Step:
    """The registry entry of a record step name (KeyError for an unknown one)."""
    return {s.record_step: s for s in STEPS}[record_step]


def step_title(record_step: str) -> str:
    """`Step.title` of a record step name (the name itself for one outside the chain)."""
    step = next((s for s in STEPS if s.record_step == record_step), None)
    return step.title if step is not None else record_step


__all__ = ["STEPS", "Step", "step_named", "step_title"]
