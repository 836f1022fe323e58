"""Job models for the Kafka-layer tests: version N of a job with one of two distinct contents."""

from __future__ import annotations

import dataclasses

from airflow_samza_expand.core.model import JobModel


def model(job: str, version: int, *, variant: str = "a", created_by: str = "tests") -> JobModel:
    """Version `version` of `job`; variants "a" and "b" differ in content (grouper and mapping)."""
    grouper = {"a": "GroupByPartition", "b": "AllSspToSingleTaskGrouper"}[variant]
    base = JobModel.initial(job, {"orders": 4}, grouper=grouper, created_by=created_by)
    return dataclasses.replace(base, version=version)


def history(job: str, versions: int) -> list[JobModel]:
    """Versions 1..`versions` alternating between the two contents."""
    return [model(job, v, variant="ab"[v % 2]) for v in range(1, versions + 1)]
