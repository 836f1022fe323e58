"""README: "Expanding a stream with broadcast partitions is refused". A broadcast stream is one
whose SSPs the job model lists under ``broadcast`` (read by every task). Its expansion is
refused at the plan, on the first try, whether Airflow grows it or it was grown outside Airflow
(``follow_live_counts``), and nothing changes; the job's other streams still expand."""

from __future__ import annotations

import subprocess
import sys

import pytest
from claims_helpers import expansion_dag, produce_keyed, run_until, tries

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand.core.model import JobModel, StreamPartitionCounts, SystemStreamPartition

pytestmark = [pytest.mark.kafka]


def broadcast_model(job_name: str, orders: str, config: str) -> JobModel:
    """v1: ``orders`` (2 partitions) in two fixed tasks, ``config`` (1 partition) broadcast."""
    return JobModel(
        1,
        job_name,
        (
            StreamPartitionCounts("kafka", config, 1, 1),
            StreamPartitionCounts("kafka", orders, 2, 2),
        ),
        {
            SystemStreamPartition("kafka", orders, 0): "Partition 0",
            SystemStreamPartition("kafka", orders, 1): "Partition 1",
        },
        grouper="GroupByPartitionFixedTasks",
        broadcast_ssps=frozenset({SystemStreamPartition("kafka", config, 0)}),
    )


@pytest.fixture
def job(kafka_default, make_job, unique_topic):
    config_topic = unique_topic("config")
    with KafkaAdmin({"bootstrap.servers": kafka_default}, timeout_s=15) as admin:
        admin.ensure_topic(config_topic, 1)
    made = make_job(
        kafka_default, model=lambda name, topic: broadcast_model(name, topic, config_topic)
    )
    made.config_topic = config_topic
    produce_keyed(made.config, made.topic, [f"key-{i}" for i in range(40)])
    produce_keyed(made.config, config_topic, [f"setting-{i}" for i in range(5)])
    assert made.v1.broadcast_ssps
    return made


def counts(job) -> dict[str, int]:
    with KafkaAdmin(job.config, timeout_s=15) as admin:
        return admin.partition_counts([job.topic, job.config_topic])


def test_growing_a_broadcast_stream_is_refused_and_changes_nothing(job) -> None:
    run = run_until(expansion_dag(job, topics=job.config_topic), "expand")
    assert tries(run)["plan"] == ("failed", 1)
    assert "expand" not in tries(run) or tries(run)["expand"][0] != "success"
    assert counts(job) == {job.topic: 2, job.config_topic: 1}
    assert [m.version for m in job.store.job_model_history()] == [1]


def test_a_broadcast_stream_grown_outside_airflow_is_refused(job) -> None:
    with KafkaAdmin(job.config, timeout_s=15) as admin:
        admin.create_partitions(job.config_topic, 2)
    dag = expansion_dag(job, topics=job.config_topic, growth={"follow_live_counts": True})
    run = run_until(dag, "write_job_model")
    assert tries(run)["plan"] == ("failed", 1)
    assert [m.version for m in job.store.job_model_history()] == [1]


def test_the_jobs_other_stream_still_expands(job) -> None:
    run = run_until(expansion_dag(job, topics=job.topic), "expand")
    states = tries(run)
    assert states["plan"] == ("success", 1) and states["expand"] == ("success", 1), states
    assert counts(job) == {job.topic: 4, job.config_topic: 1}


def test_the_cli_plan_refuses_a_broadcast_stream(tmp_path) -> None:
    path = tmp_path / "v1.json"
    path.write_text(broadcast_model("j", "orders", "config").to_json())
    cli = [sys.executable, "-m", "airflow_samza_expand.cli", "plan", "--job-model", str(path)]
    refused = subprocess.run([*cli, "--target", "config=2"], capture_output=True, text=True)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "broadcast" in refused.stderr and "config" in refused.stderr
    allowed = subprocess.run([*cli, "--target", "orders=4"], capture_output=True, text=True)
    assert allowed.returncode == 0, allowed.stderr
