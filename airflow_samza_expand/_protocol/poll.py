"""One look at a wait: every wait of the expansion is written once as a poll function (no
sleeping) in its step's module (`_protocol.steps`); the Airflow triggers loop over them, poke
mode calls them once per poke, a CLI could do either.

A poll returns `Poll`: ``done`` with the step's ``result``, or not done with the progress line
an operator reads (what it waits for and why). Transient faults (`KafkaUnavailableError`)
propagate; `Reconnect` is the one policy for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

RECONNECT_AFTER = 3


@dataclass(frozen=True)
class Poll:
    """One look at a wait."""

    done: bool
    message: str
    result: dict[str, Any] | None = None
    sleep_s: float | None = None  # wake up earlier than the poll interval (end of a grace)
    detail: Mapping[str, Any] = field(default_factory=dict)
    # what it waits for, without the figures that change every poll (a countdown, a lag): the
    # trigger and the sensor log a poll's message only when this changes ("": the message)
    waiting_for: str = ""

    @property
    def log_key(self) -> str:
        return self.waiting_for or self.message


class Reconnect:
    """After `after` transient failures in a row, the caller replaces its clients (a client
    whose connection broke may keep timing out; a new one reconnects). The time Kafka could
    not be reached does not count against the wait's deadline (`begin`), and the caller times
    a wait out only on a poll that got through: an outage of any length is waited out."""

    def __init__(self, after: int = RECONNECT_AFTER) -> None:
        self.after = after
        self.failures = 0
        self._began: float | None = None

    def begin(self, at: float, deadline: float | None) -> float | None:
        """A poll begins at ``at`` (epoch s): the wait's ``deadline`` moved by the time since
        the previous poll began when that poll failed (Kafka unreachable all along), else
        unchanged. Over an outage, from the start of its first failed poll to the start of
        the first poll that gets through, the deadline moves by the outage's length."""
        lost = at - self._began if self.failures and self._began is not None else 0.0
        self._began = at
        return None if deadline is None else deadline + max(lost, 0.0)

    def failed(self) -> bool:
        """Count one failure; True when the clients should be reopened now."""
        self.failures += 1
        return self.failures % self.after == 0

    def ok(self) -> None:
        self.failures = 0


def describe_lag(lag: Mapping[str, Mapping[int, int]]) -> str:
    """``orders[0]=12 orders[1]=0`` - the per-partition lag for a log line."""
    return " ".join(f"{t}[{p}]={n}" for t, ps in sorted(lag.items()) for p, n in sorted(ps.items()))


__all__ = ["RECONNECT_AFTER", "Poll", "Reconnect", "describe_lag"]
