"""The modes a user chooses by name, as enums: the run mode of the job, the restart, what a stale
placement does, what other managed jobs reading the topics do. Each is a ``StrEnum`` (a member
is its string, so records, XComs and templates see plain strings) and is taken as a string at
the edges - settings, operator arguments, command lines - through `parse`, which names the bad
value and the valid ones. Pure."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Self


class Mode(StrEnum):
    """A choice by name; `parse` takes the member or its string (any case, ``_`` for ``-``)."""

    @classmethod
    def parse(cls, value: Any, name: str) -> Self:
        """The member ``value`` names; ValueError naming ``name``, the value and the choices."""
        if isinstance(value, cls):
            return value
        text = str(value).strip().lower().replace("_", "-")
        try:
            return cls(text)
        except ValueError:
            choices = ", ".join(repr(m.value) for m in cls)
            raise ValueError(f"{name}={value!r} is not known - use one of {choices}") from None

    @classmethod
    def values(cls) -> tuple[str, ...]:
        return tuple(m.value for m in cls)

    def __repr__(self) -> str:
        """As its string: a message says ``run_mode='available-now'``, as the user wrote it."""
        return repr(self.value)


class RunMode(Mode):
    """How the stateful job runs: all the time, or in scheduled runs that end."""

    CONTINUOUS = "continuous"
    AVAILABLE_NOW = "available-now"


class Restart(Mode):
    """How the job takes job model vN+1: ``auto`` (the first strategy the running job can do,
    in this order) or one strategy by name (`_protocol.restart` registers each)."""

    AUTO = "auto"
    IN_PLACE = "in-place"
    IN_APP = "in-app"
    TASK = "task"
    WARM = "warm"
    COLD = "cold"


class OnStalePlacement(Mode):
    """A record placed by the old partition count after the barrier snapshot: count, log and
    report it (``warn``), or also fail the report step and stop the restarted job (``fail``)."""

    WARN = "warn"
    FAIL = "fail"


class OtherJobs(Mode):
    """Other managed jobs reading a topic this run grows: refuse the run naming them, include
    them (the run expands them too), or ignore them (grow anyway, with a warning)."""

    REFUSE = "refuse"
    INCLUDE = "include"
    IGNORE = "ignore"


def is_template(value: Any) -> bool:
    """A Jinja template (``"{{ params.x }}"``): checked when Airflow renders it."""
    return isinstance(value, str) and "{{" in value


__all__ = ["Mode", "OnStalePlacement", "OtherJobs", "Restart", "RunMode", "is_template"]
