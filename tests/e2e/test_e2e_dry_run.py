"""The example DAG ``dags/samza_expand.py`` run from its trigger form (run conf) in dry-run mode,
on Kafka only: the Params reach the steps through templates, the plan is made, the growth is
validated by the broker, the steps that change the job are skipped, the report still runs, and
nothing changes (partition count, job model history)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import airflow_env
import pytest

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

pytestmark = [pytest.mark.kafka]

DAG_FILE = Path(__file__).resolve().parents[2] / "dags" / "samza_expand.py"


def _example_dag():
    spec = importlib.util.spec_from_file_location("samza_expand_example", DAG_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def test_example_dag_dry_run_from_the_trigger_form_changes_nothing(
    e2e_airflow, kafka_bootstrap, unique_topic, capfd
) -> None:
    config = client_config(kafka_bootstrap)
    topic = unique_topic("orders")
    job = f"dry-{topic}"[:60]
    with KafkaAdmin(config) as admin, KafkaCoordinatorStore(config, job) as store:
        admin.ensure_topic(topic, 2)
        store.write_job_model(JobModel.initial(job, {topic: 2}))
        run = airflow_env.run_dag_test(
            _example_dag(),
            run_conf={"topic": topic, "job_name": job, "factor": 4, "dry_run": True},
        )
        states = airflow_env.task_states(run)
        assert states["plan"] == "success"
        assert states["expand"] == "skipped"
        for step in ("barrier", "stop_job", "write_job_model", "submit", "ack"):
            assert states[step] == "skipped", (step, states)
        assert states["report"] == "success"
        airflow_env.assert_run_succeeded(run, capfd)
        plan = airflow_env.task_instance_xcom(run, "plan")
        assert plan["plan"]["counts_after"] == {topic: 8}  # factor 4 from the form
        validated = airflow_env.task_instance_xcom(run, "expand", key="dry_run")
        assert validated["partitions_after"] == 8 and validated["dry_run"] is True
        report = airflow_env.task_instance_xcom(run, "report")
        assert report["dry_run"] is True
        assert admin.partition_counts([topic]) == {topic: 2}
        store.refresh()
        assert [m.version for m in store.job_model_history()] == [1]
