"""``jobs="all"`` through Airflow (``dag.test()``, the fake spark-submit): the managed jobs
reading the topic are found when the run starts, one mapped ``job`` group instance each (own
lease, record, coordinator, Spark arguments from ``per_job`` applied at run time); the topic is
grown once and each job restarted; no job found is a clear failure that changes nothing."""

from __future__ import annotations

import dataclasses

import pytest
import test_airflow_ownership
from airflow.sdk.exceptions import AirflowFailException
from airflow_env import assert_run_succeeded, task_context, task_instance_xcom, task_states
from test_airflow_ownership import _launches
from test_airflow_readers import assert_grown_once_and_each_on_v2, multi_job_dag, second_job

pytestmark = pytest.mark.kafka
fake_spark = test_airflow_ownership.fake_spark  # the fake spark-submit fixture


def test_jobs_all_finds_every_reader_at_run_time_grows_once_and_restarts_each(
    job, admin, fake_spark, tmp_path, kafka_bootstrap, run_dag, capfd
):
    j = job(2)
    other = second_job(j, f"{j.name}-b")
    dag = multi_job_dag(f"all_{j.name}", "all", j.topic, kafka_bootstrap, str(tmp_path / "logs"))
    run = run_dag(dag)

    assert_run_succeeded(run, capfd)
    assert admin.partition_counts([j.topic]) == {j.topic: 4}
    names = sorted([j.name, other])
    rows = task_instance_xcom(run, "jobs")
    assert [r["job_name"] for r in rows] == names
    assert_grown_once_and_each_on_v2(j, names)
    launched = _launches(fake_spark)
    assert sorted(a[a.index("--job-name") + 1] for a in launched) == names
    for name in names:
        argv = next(a for a in launched if a[a.index("--job-name") + 1] == name)
        assert f"spark.app.owner={name}" in argv
    report = task_instance_xcom(run, "report")["jobs"]
    assert {n: row["outcome"] for n, row in report.items()} == dict.fromkeys(names, "completed")
    assert report[other]["job_model_version"] == {"before": 1, "after": 2}


def test_jobs_all_without_a_managed_reader_fails_naming_the_fix(
    admin, fake_spark, tmp_path, kafka_bootstrap, run_dag, unique_topic
):
    topic = unique_topic("orphan")
    admin.ensure_topic(topic, 2)
    dag_id = f"all_none_{topic}".replace("-", "_")
    dag = multi_job_dag(dag_id, "all", topic, kafka_bootstrap, str(tmp_path / "logs"))
    run = run_dag(dag)
    assert str(run.state) == "failed"
    assert task_states(run)["jobs"] == "failed"
    assert task_states(run)["report"] == "failed"  # the run is red, not a silent success
    assert admin.partition_counts([topic]) == {topic: 2}
    assert _launches(fake_spark) == []
    with pytest.raises(AirflowFailException, match="no managed job reads .* name the jobs"):
        dag.get_task("jobs").execute(task_context("jobs"))


def test_jobs_all_rows_apply_per_job_at_run_time_and_refuse_fields_that_cannot_differ():
    from airflow_samza_expand.dags import JobSettings, SparkSettings
    from airflow_samza_expand.dags._all_jobs import job_rows
    from airflow_samza_expand.dags._settings import ExpansionSettings

    per_job = {"a": {"job": {"application_args": ["--job-name", "a"]},
                     "spark": {"conf": {"k": "v"}}}}  # fmt: skip
    s = ExpansionSettings(
        job=JobSettings(jobs="all", topics=["t"], application_args=["--base"],
                        run_mode="available-now", per_job=per_job),
        # the DAG runs the jobs
        spark=SparkSettings(application="/opt/job.py", application_on_runtime=True),
    )  # fmt: skip
    a, c = job_rows(s, ["a", "c"])
    assert a == {
        "job_name": "a",
        "application": "/opt/job.py",
        "application_args": ["--job-name", "a", "--trigger", "available-now"],
        "spark_conf": {"k": "v"},
        "co_jobs": ["c"],
        "log_dir": None,
    }
    assert c["application_args"] == ["--base", "--trigger", "available-now"]
    assert c["co_jobs"] == ["a"] and c["spark_conf"] == {}
    own = {"a": {"job": {"application_args": ["--x"]}, "growth": {"factor": 4}}}
    fixed = dataclasses.replace(s, job=dataclasses.replace(s.job, per_job=own))
    with pytest.raises(ValueError, match=r"per_job\['a'\] sets \['growth.factor'\]"):
        job_rows(fixed, ["a"])
    with pytest.raises(ValueError, match="has no application_args"):
        job_rows(dataclasses.replace(s, job=dataclasses.replace(s.job, application_args=())), ["b"])
    # a DAG naming no application runs no job of its own: an available-now job is refused
    unowned = dataclasses.replace(s, spark=SparkSettings())
    with pytest.raises(ValueError, match="job 'c': run_mode='available-now' runs the job from"):
        job_rows(unowned, ["c"])
    with pytest.raises(ValueError, match="or jobs='all'"):
        ExpansionSettings(job=JobSettings(jobs="everything", topics=["t"]))
