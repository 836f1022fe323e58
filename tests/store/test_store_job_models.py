"""docs/design.md 'Fixed tasks' and version order, enforced by both stores on write and on read."""

from __future__ import annotations

import dataclasses

import pytest

from airflow_samza_expand.core._plan import plan_expansion
from airflow_samza_expand.core.errors import CorruptCoordinatorRecordError, InvalidJobModelError
from airflow_samza_expand.core.model import JobModel, StreamPartitionCounts, SystemStreamPartition
from airflow_samza_expand.store._kafka_log import encode_key

CREATED_AT = "2026-01-02T03:04:05Z"


def v1(job: str) -> JobModel:
    return JobModel.initial(job, {"orders": 2}, created_at=CREATED_AT)


def broken_v2(job: str) -> JobModel:
    """Naive: P0 holds 0,1 and P1 holds 2,3 after 2 -> 4 (fixed tasks want 0,2 and 1,3)."""
    ssp = lambda p: SystemStreamPartition("kafka", "orders", p)  # noqa: E731
    return JobModel(
        version=2,
        job_name=job,
        streams=(StreamPartitionCounts("kafka", "orders", 4, 2),),
        ssp_to_task={
            ssp(0): "Partition 0",
            ssp(1): "Partition 0",
            ssp(2): "Partition 1",
            ssp(3): "Partition 1",
        },
        created_at=CREATED_AT,
    )


def test_a_model_breaking_fixed_tasks_is_refused_on_write(make_store):
    store = make_store()
    store.write_job_model(v1(store.job_name))
    with pytest.raises(InvalidJobModelError, match="fixed tasks") as caught:
        store.write_job_model(broken_v2(store.job_name))
    message = str(caught.value)
    assert "[kafka, orders, 2] in 'Partition 1'" in message
    assert "[kafka, orders, 3] in 'Partition 1'" in message
    assert "plan_expansion" in message  # the fix
    assert make_store().latest_job_model().version == 1
    good = plan_expansion(v1(store.job_name), None, {"orders": 4}).new_job_model
    assert store.write_job_model(good) == good


def test_a_stored_model_breaking_fixed_tasks_is_refused_on_read(make_store, store_kind):
    store = make_store()
    store.write_job_model(v1(store.job_name))
    bad = broken_v2(store.job_name).to_json().encode()
    if store_kind == "kafka":  # written around the store, as a hand edit would be
        store.backend.io.produce([(encode_key("job-model", "2", "hand-edit"), bad)])
    else:
        store.backend.files.replace(bad, "job-model", "2.json")
    reader = make_store()
    with pytest.raises(CorruptCoordinatorRecordError, match="fixed tasks") as caught:
        reader.latest_job_model()
    assert "[kafka, orders, 3] in 'Partition 1'" in str(caught.value)
    assert reader.job_model(1) == v1(store.job_name)


def test_a_version_that_skips_one_is_refused_on_write(make_store):
    store = make_store()
    with pytest.raises(InvalidJobModelError, match="must be v1"):
        store.write_job_model(dataclasses.replace(v1(store.job_name), version=2))
    store.write_job_model(v1(store.job_name))
    v3 = plan_expansion(v1(store.job_name), None, {"orders": 4}).new_job_model
    with pytest.raises(InvalidJobModelError, match="next version must be v2"):
        store.write_job_model(dataclasses.replace(v3, version=3))
    assert [m.version for m in make_store().job_model_history()] == [1]
