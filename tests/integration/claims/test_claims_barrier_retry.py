"""The ordering barrier, retried as Airflow retries it (`dag.test()` of the factory's DAG):

* a barrier that does not hold before its timeout fails with `BarrierTimeoutError` on its first
  try (a refusal: not retried), and the job is untouched: job model still v1, no stop requested;
* cleared after its grace, the barrier does not wait a grace again: it reuses the first try's
  snapshot and holds once the job has committed up to it (README FAQ).
"""

from __future__ import annotations

import pytest
from claims_helpers import expansion_dag, produce_keyed, run_until, tries
from kafka_helpers import commit_offsets  # tests/airflow

from airflow_samza_expand._kafka.admin import KafkaAdmin

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]


def test_barrier_timeout_changes_nothing_and_a_cleared_barrier_reuses_its_snapshot(
    kafka_default, make_job
) -> None:
    job = make_job(kafka_default)
    produce_keyed(job.config, job.topic, [f"key-{i}" for i in range(40)])
    with KafkaAdmin(job.config, timeout_s=15) as admin:
        highs = admin.high_watermarks({job.topic: [0, 1]})[job.topic]
    assert all(highs[p] > 0 for p in (0, 1))  # the job (nobody) has records to drain

    # 1. the barrier snapshots after its 0.5 s grace, then gives up at once: nobody committed
    first = run_until(expansion_dag(job, barrier={"barrier_timeout_s": 0.0}), "stop_job")
    states = tries(first)
    assert states["expand"] == ("success", 1), states
    assert states["barrier"] == ("failed", 1), states  # a refusal: not retried
    assert "stop_job" not in states or states["stop_job"][0] != "success", states
    assert [m.version for m in job.store.job_model_history()] == [1]
    assert job.store.stop_request() is None
    with KafkaAdmin(job.config, timeout_s=15) as admin:
        assert admin.partition_counts([job.topic]) == {job.topic: 4}  # grown, job still on v1

    # 2. the job catches up to the snapshot; the run is cleared (same run id: the same owner of
    # the expansion lease) and its barrier runs again with an hour of grace: its grace is over
    # (it counts from the expansion, and the snapshot exists), so it holds at its first check.
    # A barrier that waited the grace again would hit the test's timeout.
    commit_offsets(job.config, job.name, job.topic, highs)
    again = run_until(
        expansion_dag(job, barrier={"producer_refresh_grace_s": 3600.0}), "barrier", rerun_of=first
    )
    assert again.run_id == first.run_id
    states = tries(again)
    assert states["barrier"] == ("success", 1), states
    assert [m.version for m in job.store.job_model_history()] == [1]
    assert job.store.stop_request() is None
