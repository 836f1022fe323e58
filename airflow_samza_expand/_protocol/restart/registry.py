"""The restart strategies, in the order ``auto`` tries them
(docs/design.md 'How a restart is chosen'): in place, in-app, the user's restart task (when one is
supplied), warm, cold. A strategy is a module of this package with a ``STRATEGY``; registering one
is one line here."""

from __future__ import annotations

from importlib import import_module

from airflow_samza_expand._protocol.restart.strategy import RestartStrategy

ORDER = (
    "in_place",
    "in_app",
    "task",
    "warm",
    "cold",
)

STRATEGIES: dict[str, RestartStrategy] = {
    s.mode: s for s in (import_module(f"{__package__}.{name}").STRATEGY for name in ORDER)
}

__all__ = ["ORDER", "STRATEGIES"]
