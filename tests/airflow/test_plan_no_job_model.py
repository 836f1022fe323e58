"""A plan for a job without a job model (a mistyped name) changes nothing in Kafka:
no coordinator topic created, no lease taken, and one refusal naming ``samza-expand init-job``
and the job that does exist."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException
from airflow_env import task_context

from airflow_samza_expand._protocol.steps.plan.job_models import close_first, no_job_model_message
from airflow_samza_expand.airflow.operators import PlanExpansionOperator
from airflow_samza_expand.store import coordinator_topic

pytestmark = pytest.mark.kafka


def test_a_mistyped_job_name_is_refused_and_creates_nothing(job, admin):
    j = job(2)
    typo = j.name[:-1]  # "orders-countr" for "orders-counter"
    plan = PlanExpansionOperator(task_id="plan", job_name=typo, topics=[j.topic], factor=2)

    with pytest.raises(AirflowFailException, match="NoJobModelError") as refused:
        plan.execute(task_context("plan"))

    message = str(refused.value)
    assert f"job {typo!r} has no job model" in message, message
    assert "samza-expand init-job" in message and f"--job-name {typo} " in message, message
    assert f"Did you mean {j.name!r}?" in message, message
    jobs = message.split("Jobs with a job model: ")[1]
    assert jobs.startswith(j.name), message  # the close name first
    assert "start the job once" not in message  # the one way to write v1 is named
    # nothing in Kafka: the coordinator topic (where the lease would be) was never created
    assert coordinator_topic(typo) not in admin.topic_names()


def test_the_plan_names_only_jobs_that_have_a_job_model(job, admin, kconfig):
    """A coordinator topic without a job model (left by an older version's mistyped plan)
    is no job to suggest."""
    from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

    real = job(2)
    phantom = f"{real.name}-phantom"
    with KafkaCoordinatorStore(kconfig, phantom) as store:  # a topic holding only a lease
        store.release_lease(store.acquire_lease("expansion", "airflow:old/run", ttl_s=1))
    plan = PlanExpansionOperator(task_id="plan", job_name=real.name + "x", topics=[real.topic])
    with pytest.raises(AirflowFailException, match="samza-expand init-job") as refused:
        plan.execute(task_context("plan"))
    assert f"Did you mean {real.name!r}?" in str(refused.value)
    assert phantom not in str(refused.value)


def test_the_refusal_lists_close_names_first():
    names = ["billing", "orders-counter", "orders-count-eu", "zeta"]
    assert close_first("orders-countr", names)[:2] == ["orders-counter", "orders-count-eu"]
    text = no_job_model_message("orders-countr", "coordinator topic t", names)
    assert "Did you mean 'orders-counter'?" in text
    assert "Jobs with a job model: orders-counter, orders-count-eu, billing, zeta." in text
    assert "samza-expand init-job --bootstrap-servers <kafka> --job-name orders-countr" in text
    assert "No job has a job model here yet." in no_job_model_message("a", "t", [])
