"""A job with one planned expansion on a real Kafka store, and its record put in any status:
what the refusal and outcome-gate tests share (`planned_job`, `walk`, `put_status`,
`cluster_state`); and the restart tests' file store with one expanded record (`store`)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from file_stores import job_store

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand._protocol import records
from airflow_samza_expand._protocol.ownership import cli_holder
from airflow_samza_expand._protocol.steps.plan.step import PlanRequest, plan
from airflow_samza_expand.core._clock import now_iso
from airflow_samza_expand.core._plan import plan_expansion
from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store import CoordinatorStore
from airflow_samza_expand.store._files import FileCoordinatorStore
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

S = ExpansionStatus
ORDER = records.ORDER
JOB = "orders-counter"  # the job of the `store` fixture
EXPANSION = "orders-counter~orders.2-4"  # its expansion, expanded 2 -> 4


@dataclass
class PlannedJob:
    """Job `name` reads `topic` (2 partitions, job model v1); expansion `expansion_id` (2 -> 4)
    is planned by `holder`, who holds the job's expansion lease."""

    name: str
    topic: str
    store: KafkaCoordinatorStore
    admin: KafkaAdmin
    holder: str
    expansion_id: str

    def record(self) -> ExpansionRecord:
        return records.require(self.store, self.expansion_id)

    def grow(self) -> None:
        """The topic at its target, 4 partitions."""
        self.admin.create_partitions(self.topic, 4)

    def write_v2(self) -> JobModel:
        """Job model v2 for 4 partitions (the write step's model)."""
        v1 = self.store.latest_job_model()
        assert v1 is not None and v1.version == 1
        model = plan_expansion(v1, {self.topic: 4}, {self.topic: 4}).new_job_model
        return self.store.write_job_model(model)


@pytest.fixture
def store(tmp_path: Any) -> FileCoordinatorStore:
    """A file store of `JOB` with job model v1 (orders: 2) and `EXPANSION` expanded 2 -> 4."""
    made = job_store(tmp_path, JOB)
    stamp = now_iso()
    record = ExpansionRecord(
        expansion_id=EXPANSION, job_name=JOB, base_version=1, target_version=2,
        plan={"counts_before": {"orders": 2}, "counts_after": {"orders": 4}},
        status=ExpansionStatus.EXPANDED, owner="test", created_at=stamp, updated_at=stamp,
    )  # fmt: skip
    made.put_expansion(record, expected_revision=0)
    return made


@pytest.fixture
def job(kafka_bootstrap: str, unique_topic: Any) -> Iterator[tuple]:
    """``(name, topic, store, admin, config)``: job `name` reads `topic` (2 partitions), job
    model v1 written."""
    config = client_config(kafka_bootstrap)
    name = f"job-{uuid.uuid4().hex[:10]}"
    topic = unique_topic("orders")
    with KafkaAdmin(config, timeout_s=15) as admin:
        admin.ensure_topic(topic, 2)
        store = KafkaCoordinatorStore(config, name)
        store.write_job_model(JobModel.initial(name, {topic: 2}))
        yield name, topic, store, admin, config
        store.close()


@pytest.fixture
def planned_job(job: tuple) -> PlannedJob:
    name, topic, store, admin, _ = job
    holder = cli_holder()
    request = PlanRequest(job_name=name, topics=(topic,), check_partitioner=False)
    planned = plan(store, admin, request, holder)
    assert planned.expansion_id is not None, planned.message
    return PlannedJob(name, topic, store, admin, holder, planned.expansion_id)


def walk(store: CoordinatorStore, expansion_id: str, status: ExpansionStatus) -> ExpansionRecord:
    """Walk the record through the status machine to `status`, one allowed transition a write
    as the steps do (``failed`` from ``barrier-passed``); a record there or past it stays."""
    record = records.require(store, expansion_id)
    last = status if status in ORDER else S.BARRIER_PASSED
    path = (*ORDER[1 : ORDER.index(last) + 1], *(() if status in ORDER else (status,)))
    for step in path:
        if step not in ORDER or not record.reached(step):
            record = store.put_expansion(record.advance(step), expected_revision=record.revision)
    return record


def put_status(job: PlannedJob, status: ExpansionStatus, **changes: Any) -> ExpansionRecord:
    """`walk` the job's record to `status`, then apply `changes`."""
    record = walk(job.store, job.expansion_id, status)
    if changes:
        changed = dataclasses.replace(record, **changes)
        record = job.store.put_expansion(changed, expected_revision=record.revision)
    return record


def cluster_state(job: PlannedJob) -> dict[str, Any]:
    """Everything a step could change: the record, the stop request, the topic's count, the
    job models, the processors."""
    return {
        "record": job.record().to_dict(),
        "stop": job.store.stop_request(),
        "partitions": job.admin.partition_counts([job.topic]),
        "models": [m.version for m in job.store.job_model_history()],
        "processors": job.store.processors(),
    }
