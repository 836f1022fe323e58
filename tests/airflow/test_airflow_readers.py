"""Other readers of the grown topic through Airflow (dev broker, ``dag.test()``): a run naming
only one of two managed jobs reading the topic is refused naming both, changing nothing;
``other_jobs="ignore"`` goes on with a warning; a consumer group outside the provider is a
warning in the plan's log, its XCom, the expansion record and the report."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
import test_airflow_ownership
from airflow.sdk.exceptions import AirflowFailException
from airflow_env import task_context, task_instance_xcom, task_states
from kafka_helpers import commit_offsets
from race_dags import build
from test_airflow_ownership import _launches

from airflow_samza_expand.airflow.operators import PlanExpansionOperator
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.dags import (
    BarrierSettings,
    JobSettings,
    KafkaSettings,
    RestartSettings,
    SparkSettings,
    build_expansion_dag,
    stream_job_args,
)
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

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


def multi_job_dag(
    dag_id: str, jobs: list[str] | str, topic: str, bootstrap: str, log_dir: str, **settings
):
    def own(name: str) -> dict:  # per_job as a function: also for jobs="all" (run time)
        args = stream_job_args(
            job_name=name,
            bootstrap_servers=bootstrap,
            checkpoint_dir=f"{log_dir}/{name}/checkpoint",
            output_topic=f"{topic}-{name}-out",
        )
        return {"job": {"application_args": args}, "spark": {"conf": {"spark.app.owner": name}}}

    return build_expansion_dag(
        dag_id,
        job=JobSettings(jobs=jobs, per_job=own, topics=[topic]),
        barrier=BarrierSettings(producer_refresh_grace_s=0.0, barrier_timeout_s=120.0),
        restart=RestartSettings(stop_timeout_s=60.0, ack_timeout_s=120.0, **settings),
        kafka=KafkaSettings(check_partitioner=False),
        spark=SparkSettings(log_dir=log_dir),
        poll_interval_s=0.5,
        retries=0,
        retry_delay=timedelta(seconds=1),
    )


def assert_grown_once_and_each_on_v2(j, names: list[str]) -> None:
    """Each job completed its expansion on v2 (topic at 4); only one of them grew the topic."""
    applied = []
    for name in names:
        with KafkaCoordinatorStore(j.config, name) as store:
            assert [m.version for m in store.job_model_history()] == [1, 2]
            assert store.latest_job_model().partition_counts() == {j.topic: 4}
            (record,) = store.expansions()
            assert record.status == "completed"
            applied.append(record.results["expand"][j.topic]["applied"])
    assert sorted(applied) == [False, True]  # one growth; the other job found it grown


def test_two_jobs_one_run_grow_the_topic_once_and_restart_each_job(
    job, admin, fake_spark, tmp_path, kafka_bootstrap, run_dag
):
    j = job(2)
    other = second_job(j, f"{j.name}-b")
    outsider = f"billing-{j.name}"
    commit_offsets(j.config, outsider, j.topic, {1: 2})
    dag = multi_job_dag(
        f"two_jobs_{j.name}", [j.name, other], j.topic, kafka_bootstrap, str(tmp_path / "logs")
    )
    run = run_dag(dag)

    states = task_states(run)
    assert str(run.state) == "success", states
    assert admin.partition_counts([j.topic]) == {j.topic: 4}
    assert_grown_once_and_each_on_v2(j, [j.name, other])
    for name in (j.name, other):
        plan = task_instance_xcom(run, f"{name}.plan")
        assert plan["readers"]["managed_jobs"] == {j.topic: sorted([j.name, other])}
        assert plan["unmanaged_groups"] == [outsider]
    launched = [argv[argv.index("--job-name") + 1] for argv in _launches(fake_spark)]
    assert sorted(launched) == sorted([j.name, other])
    for name in (j.name, other):
        conf = next(a for a in _launches(fake_spark) if name in a and "--conf" in a)
        assert f"spark.app.owner={name}" in conf
    report = task_instance_xcom(run, "report")["jobs"]
    assert {name: row["outcome"] for name, row in report.items()} == {
        j.name: "completed",
        other: "completed",
    }
    assert report[other]["job_model_version"] == {"before": 1, "after": 2}


@pytest.mark.parametrize(("restart", "launcher"), [("cold", "submit"), ("warm", "submit_standby")])
def test_one_job_failing_does_not_undo_the_other(
    job, admin, fake_spark, tmp_path, kafka_bootstrap, run_dag, restart, launcher
):
    j = job(2)
    other = second_job(j, f"{j.name}-b")
    dag = multi_job_dag(
        f"one_fails_{j.name}", [j.name, other], j.topic, kafka_bootstrap, str(tmp_path / "logs"),
        restart=restart,
    )  # fmt: skip
    # the second job's restarted job exits at once (no bootstrap servers): the step that
    # launches it (the submit, or in a warm restart the standby launch) fails
    launch = dag.get_task(f"{other}.{launcher}")
    launch.application_args = [a for a in launch.application_args if a != kafka_bootstrap]
    launch.application_args.remove("--bootstrap-servers")
    dag.get_task(f"{other}.ack").timeout = 3
    run = run_dag(dag)

    assert str(run.state) == "failed"
    report = task_instance_xcom(run, "report")["jobs"]
    assert report[j.name]["outcome"] == "completed"
    assert report[other]["outcome"] == "failed" and report[other]["failed_step"] == launcher
    assert report[other]["states"]["ack"] == "upstream_failed"
    with KafkaCoordinatorStore(j.config, j.name) as store:
        assert [m.version for m in store.job_model_history()] == [1, 2]
        assert store.expansions()[0].status == "completed"


def test_multi_job_settings_fail_at_parse_time_naming_the_fix(tmp_path):
    with pytest.raises(ValueError, match="or jobs='all'"):  # jobs="all": test_airflow_all_jobs
        multi_job_dag("all_jobs", "al", "orders", "b:9092", str(tmp_path))
    with pytest.raises(ValueError, match="has no application_args"):
        job = JobSettings(jobs=["a", "b"], per_job={"a": {}}, topics=["orders"])
        build_expansion_dag("no_args", job=job)
    with pytest.raises(TypeError, match=r"per_job\['a'\]: unknown setting\(s\) \['cnf'\]"):
        job = JobSettings(
            jobs=["a"],
            application_args=["--x"],
            per_job=lambda name: {"spark": {"cnf": {}}},
            topics=["orders"],
        )
        build_expansion_dag("typo", job=job)
    dag = multi_job_dag("two", ["a.b", "c"], "orders", "b:9092", str(tmp_path))
    assert dag.get_task("a_b.plan").co_jobs == ["c"]
    assert dag.get_task("c.plan").other_jobs == "include"
    assert {t.task_id for t in dag.get_task("a_b.plan").downstream_list} == {
        "a_b.expand",
        "c.expand",
    }
