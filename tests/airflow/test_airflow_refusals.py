"""Refusals through the Airflow surface: a huge target (finding 6) and refused credentials
(finding 9) fail the task at once with AirflowFailException (never retried), naming the
problem and the fix, changing nothing."""

from __future__ import annotations

import json
import os

import pytest
from airflow.sdk.exceptions import AirflowFailException
from airflow_env import task_context

from airflow_samza_expand.airflow.operators import PlanExpansionOperator

pytestmark = pytest.mark.kafka

PASSWORD = "hunter2-never-in-a-log"


@pytest.mark.parametrize(
    ("settings", "target", "message"),
    [({}, 2**20, "max_partitions=4096"), ({"max_partitions": 8}, 16, "max_partitions=8")],
)
def test_a_target_above_max_partitions_is_refused_at_once(job, admin, settings, target, message):
    j = job(2)
    op = PlanExpansionOperator(
        task_id="plan", job_name=j.name, targets={j.topic: target}, **settings
    )
    with pytest.raises(AirflowFailException, match=message) as refused:
        op.execute(task_context("plan"))
    assert "MaxPartitionsError" in str(refused.value)
    lease = j.store.get_lease("expansion")
    assert j.store.expansions() == [] and (lease is None or lease.released)
    assert admin.partition_counts([j.topic]) == {j.topic: 2}


def test_refused_credentials_fail_the_task_naming_authentication(dev_broker, airflow_home):
    conn = {
        "conn_type": "kafka",
        "extra": {
            "bootstrap.servers": dev_broker.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "svc",
            "sasl.password": PASSWORD,
        },
    }
    os.environ["AIRFLOW_CONN_KAFKA_SASL"] = json.dumps(conn)
    try:
        op = PlanExpansionOperator(
            task_id="plan",
            job_name="job-auth",
            topics=["orders"],
            kafka_config_id="kafka_sasl",
            request_timeout_s=300,  # far beyond the test: the refusal must not wait for it
        )
        with pytest.raises(AirflowFailException, match="authentication") as refused:
            op.execute(task_context("plan"))
    finally:
        os.environ.pop("AIRFLOW_CONN_KAFKA_SASL", None)
    assert "KafkaAuthenticationError" in str(refused.value)
    assert PASSWORD not in str(refused.value)
