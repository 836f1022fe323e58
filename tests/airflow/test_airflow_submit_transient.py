"""The submit step and a broker that cannot serve the coordinator store for a moment (a rolling
restart, a leader election: the fault matrix's ``broker/in-place/switch``). The continuous
submit task is not retried by Airflow (a second launch would run the job twice), so the step asks
the store again itself before it launches anything, and fails only once the outage outlasts its
bound. The job is `fake_spark_submit.py` standing in for ``spark-submit``; the outage is the
development broker's fault injection (a real broker cannot be told to fail exactly these reads)."""

from __future__ import annotations

import airflow_env  # noqa: F401 - sets a temporary AIRFLOW_HOME before airflow is imported
import pytest
import test_airflow_ownership as ownership
from airflow_env import task_context

from airflow_samza_expand.airflow.operators._submit import SubmitStreamJobOperator

pytestmark = [pytest.mark.kafka, pytest.mark.dev_broker]

fake_spark, _launches = ownership.fake_spark, ownership._launches  # fake spark-submit on PATH


def test_submit_asks_the_store_again_when_the_broker_cannot_serve_it_for_now(
    job, fake_spark, dev_broker
):
    j = job(2)
    dev_broker.faults.inject("ListOffsets", "error", error="NOT_LEADER_OR_FOLLOWER", times=4)
    op = SubmitStreamJobOperator(
        task_id="submit", application="job.py", run_mode="available-now", job_name=j.name
    )
    result = op.execute(task_context("submit"))

    assert result["exit_code"] == 0
    assert dev_broker.faults.hits("ListOffsets") == 4  # the outage was served to the step's reads
    assert len(_launches(fake_spark)) == 1
