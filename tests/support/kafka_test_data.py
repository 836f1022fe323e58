"""Test data on Kafka shared by the kafka, store, protocol/barrier and demo tests: job models
(version N of a job with one of two distinct contents) and produced records."""

from __future__ import annotations

import dataclasses

from airflow_samza_expand.core.model import JobModel

CREATED_AT = "2026-01-02T03:04:05Z"


def model(job: str, version: int, *, variant: str = "a", created_by: str = "tests") -> JobModel:
    """Version `version` of `job`; variants "a" and "b" differ in content (grouper and mapping)."""
    grouper = {"a": "GroupByPartition", "b": "AllSspToSingleTaskGrouper"}[variant]
    base = JobModel.initial(
        job, {"orders": 4}, grouper=grouper, created_by=created_by, created_at=CREATED_AT
    )
    return dataclasses.replace(base, version=version)


def history(job: str, versions: int) -> list[JobModel]:
    """Versions 1..`versions` alternating between the two contents."""
    return [model(job, v, variant="ab"[v % 2]) for v in range(1, versions + 1)]


def produce(
    config: dict[str, str],
    topic: str,
    records: list[tuple[bytes | None, bytes | None, int | None]],
    **producer_settings: str,
) -> None:
    """Produce (key, value, partition or None) records and wait for every acknowledgement."""
    from confluent_kafka import Producer

    producer = Producer({**config, "linger.ms": "5", **producer_settings})
    failures: list[object] = []

    def on_delivery(err, _msg):
        if err is not None:
            failures.append(err)

    for key, value, partition in records:
        kwargs = {} if partition is None else {"partition": partition}
        producer.produce(topic, value=value, key=key, on_delivery=on_delivery, **kwargs)
        producer.poll(0)
    assert producer.flush(30) == 0, "records left unacknowledged"
    assert not failures, failures
