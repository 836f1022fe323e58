"""Other readers of the grown topic through Airflow (dev broker, ``dag.test()``): a run naming
only one of two managed jobs reading the topic is refused naming both, changing nothing;
``other_jobs="ignore"`` goes on with a warning; a consumer group outside the provider is a
warning in the plan's log, its XCom, the expansion record and the report."""

from __future__ import annotations

import logging

import pytest
import test_airflow_ownership
from airflow.sdk.exceptions import AirflowFailException
from airflow_env import task_context, task_instance_xcom, task_states
from kafka_helpers import commit_offsets
from race_dags import build

from airflow_samza_expand.airflow.operators import PlanExpansionOperator
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store.kafka import KafkaCoordinatorStore

pytestmark = pytest.mark.kafka
fake_spark = test_airflow_ownership.fake_spark  # the fake spark-submit fixture


def second_job(j, name: str) -> str:
    """Another managed job (its own coordinator store) reading ``j.topic``."""
    with KafkaCoordinatorStore(j.config, name) as store:
        store.write_job_model(JobModel.initial(name, {j.topic: 2}))
    return name


def test_a_run_naming_one_of_two_jobs_is_refused_naming_both(
    job, admin, fake_spark, tmp_path, kafka_bootstrap, run_dag
):
    j = job(2)
    other = second_job(j, f"{j.name}-b")
    dag = build(
        dag_id=f"one_of_two_{j.name}",
        job_name=j.name,
        topic=j.topic,
        bootstrap=kafka_bootstrap,
        log_dir=str(tmp_path / "logs"),
    )
    run = run_dag(dag)
    assert str(run.state) == "failed"
    assert task_states(run)["plan"] == "failed"
    assert admin.partition_counts([j.topic]) == {j.topic: 2}  # nothing grown
    assert j.store.expansions() == []
    lease = j.store.get_lease("expansion")
    assert lease is None or lease.released
    op = PlanExpansionOperator(task_id="plan", job_name=j.name, topics=[j.topic])
    with pytest.raises(AirflowFailException) as refused:
        op.execute(task_context("plan"))
    text = str(refused.value)
    assert "OtherJobsReadTopicError" in text and j.name in text and other in text
    assert "other_jobs='ignore'" in text and "jobs=" in text


def test_other_jobs_ignore_plans_with_a_warning(job, caplog):
    j = job(2)
    other = second_job(j, f"{j.name}-b")
    op = PlanExpansionOperator(
        task_id="plan",
        job_name=j.name,
        topics=[j.topic],
        other_jobs="ignore",
        check_partitioner=False,
    )
    with caplog.at_level(logging.WARNING):
        result = op.execute(task_context("plan"))
    assert result["plan"]["counts_after"] == {j.topic: 4}
    assert result["readers"]["managed_jobs"] == {j.topic: sorted([j.name, other])}
    assert other in result["readers"]["warnings"][0]
    assert any("NOT expanded" in r.getMessage() and other in r.getMessage() for r in caplog.records)


def test_an_unmanaged_group_is_a_warning_in_the_plan_xcom_record_and_report(
    job, fake_spark, tmp_path, kafka_bootstrap, run_dag
):
    j = job(2)
    outsider = f"billing-{j.name}"
    commit_offsets(j.config, outsider, j.topic, {0: 3})
    commit_offsets(j.config, j.name, j.topic, {0: 1, 1: 1})  # the job's own group
    dag = build(
        dag_id=f"unmanaged_{j.name}",
        job_name=j.name,
        topic=j.topic,
        bootstrap=kafka_bootstrap,
        log_dir=str(tmp_path / "logs"),
        dry_run=True,
    )
    run = run_dag(dag)
    assert str(run.state) == "success"
    plan = task_instance_xcom(run, "plan")
    assert plan["unmanaged_groups"] == [outsider]
    assert plan["readers"]["managed_jobs"] == {j.topic: [j.name]}
    assert outsider in plan["readers"]["warnings"][0]
    report = task_instance_xcom(run, "report")
    assert report["readers"]["unmanaged_groups"] == {j.topic: [outsider]}

    recorded = PlanExpansionOperator(
        task_id="plan", job_name=j.name, topics=[j.topic], check_partitioner=False
    ).execute(task_context("plan"))
    record = j.store.get_expansion(recorded["expansion_id"])
    assert record.results["plan"]["readers"]["groups"] == [outsider]
