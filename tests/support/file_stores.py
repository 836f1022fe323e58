"""A file coordinator store of one job with job model v1 written (the pure protocol tests' and
the demo tools' store: no Kafka)."""

from __future__ import annotations

from pathlib import Path

from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._files import FileCoordinatorStore

JOB = "orders-counter"


def job_store(where: Path | str, job: str = JOB, counts: dict[str, int] | None = None):
    """A `FileCoordinatorStore` of ``job`` in ``where`` with job model v1 (``orders``: 2)."""
    store = FileCoordinatorStore(str(where), job)
    store.write_job_model(JobModel.initial(job, counts or {"orders": 2}))
    return store
