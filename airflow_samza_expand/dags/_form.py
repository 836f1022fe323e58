"""The trigger form `build_expansion_dag` gives unless it is handed ``params``: the settings an
operator chooses per run - the growth factor, a dry run, the producer refresh grace and the
barrier timeout - as Airflow ``Param`` fields whose defaults are the DAG's own values (so a
run triggered without the form does what the DAG says), each explained in the form.

``params=`` of your own replaces the form (wire its fields with templates such as
``factor="{{ params.factor }}"``); ``params={}`` turns it off. A setting given as a template
already, and the factor of a DAG with ``targets`` or a growth ``policy``, get no field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from airflow.sdk import Param

from airflow_samza_expand.dags._all_jobs import ALL_JOBS
from airflow_samza_expand.dags._settings import ExpansionSettings

FACTORS = (2, 4, 8, 16)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _fields(s: ExpansionSettings) -> dict[str, Param]:
    form: dict[str, Param] = {}
    growth, barrier = s.growth, s.barrier
    if growth.targets is None and growth.policy is None and isinstance(growth.factor, int):
        form["factor"] = Param(
            growth.factor,
            type="integer",
            enum=sorted({*FACTORS, growth.factor}),
            title="Growth factor",
            description="Each input topic grows to its current partition count x this factor "
            "(a power of two keeps every key's state in its task).",
        )
    if isinstance(s.dry_run, bool):
        form["dry_run"] = Param(
            s.dry_run,
            type="boolean",
            title="Dry run",
            description="Plan and validate the growth (partitioner, limits, other jobs) and "
            "change nothing: no topic grows, no record or job model is written.",
        )
    if _number(barrier.producer_refresh_grace_s):
        form["producer_refresh_grace_s"] = Param(
            barrier.producer_refresh_grace_s,
            type="number",
            minimum=0,
            title="Producer refresh grace (s)",
            description="Seconds the producers may keep the old partition count after the "
            "growth: at least how often they refresh the topic's metadata, in seconds (a Kafka "
            "producer refreshes every 300 s by default).",
        )
    if _number(barrier.barrier_timeout_s):
        form["barrier_timeout_s"] = Param(
            barrier.barrier_timeout_s,
            type="number",
            minimum=0,
            title="Barrier timeout (s)",
            description="How long after the grace the job may take to read the old partitions "
            "up to their snapshot before the barrier step fails (0: check once after the grace; "
            "nothing is lost: clear it to wait again).",
        )
    return form


def trigger_form(
    settings: ExpansionSettings, params: Mapping[str, Any] | None
) -> tuple[ExpansionSettings, dict[str, Any]]:
    """The settings (each form field's setting now reads ``{{ params.<field> }}``) and the DAG's
    ``params``: the default form, or `params` as given (module docstring)."""
    if params is not None or settings.job.jobs == ALL_JOBS:
        return settings, dict(params or {})
    form = _fields(settings)
    templated = {name: "{{ params." + name + " }}" for name in form}
    groups = {"factor": "growth", "dry_run": None}  # the others: the barrier group's
    top = {n: v for n, v in templated.items() if groups.get(n, "barrier") is None}
    own = {
        group: {n: v for n, v in templated.items() if groups.get(n, "barrier") == group}
        for group in ("growth", "barrier")
    }
    form_settings = settings.with_fields({g: f for g, f in own.items() if f}, "trigger form")
    return dataclasses.replace(form_settings, **top), dict(form)


__all__ = ["trigger_form"]
