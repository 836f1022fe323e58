"""Narrow views of the coordinator store, by role, for code that reads only one part of it
(typing only: `CoordinatorStore` and its subclasses have every method listed here).

* `JobModelReader` - the newest job model (a step that only needs the job's current counts).
* `ExpansionReader` - the typed expansion records, newest first (the Spark side's switch and
  order check, which read the records of the expansions that made a job model).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from airflow_samza_expand.core._record import ExpansionRecord
    from airflow_samza_expand.core.model import JobModel


class JobModelReader(Protocol):
    """Reads the job's newest job model (`CoordinatorStore.latest_job_model`)."""

    def latest_job_model(self) -> JobModel | None: ...


class ExpansionReader(Protocol):
    """Reads the job's expansion records, newest first (`CoordinatorStore.expansions`)."""

    def expansions(self) -> list[ExpansionRecord]: ...


__all__ = ["ExpansionReader", "JobModelReader"]
