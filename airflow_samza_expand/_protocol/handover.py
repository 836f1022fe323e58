"""The restart modes under their first names (``handover``): kept for code that imports them.
The restart's home is `_protocol.restart` (one object per strategy, rule 1.8); this module only
re-exports it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_samza_expand._protocol.restart import (
    AUTO,
    LAUNCH_STEPS,
    STRATEGIES,
    RestartChoice,
    RestartStrategy,
    choose_restart,
    normalise_restart,
    strategy_of,
    waits_for_drain,
)
from airflow_samza_expand._protocol.restart import cold as _cold
from airflow_samza_expand._protocol.restart import in_app as _in_app
from airflow_samza_expand._protocol.restart import in_place as _in_place
from airflow_samza_expand._protocol.restart import warm as _warm

if TYPE_CHECKING:
    from airflow_samza_expand.core._record import ExpansionRecord

WARM = _warm.STRATEGY.mode
COLD = _cold.STRATEGY.mode
IN_PLACE = _in_place.STRATEGY.mode
IN_APP = _in_app.STRATEGY.mode
HANDOVER_MODES = (AUTO, *STRATEGIES)
normalise_handover = normalise_restart


def in_place(record: ExpansionRecord | None) -> RestartChoice | None:
    """The record's choice when it is the switch in place (rule 1.9), else None."""
    choice = RestartChoice.of_record(record)
    return choice if choice is not None and choice.strategy is _in_place.STRATEGY else None


__all__ = [
    "AUTO",
    "COLD",
    "HANDOVER_MODES",
    "IN_APP",
    "IN_PLACE",
    "LAUNCH_STEPS",
    "STRATEGIES",
    "WARM",
    "RestartChoice",
    "RestartStrategy",
    "choose_restart",
    "in_place",
    "normalise_handover",
    "strategy_of",
    "waits_for_drain",
]
