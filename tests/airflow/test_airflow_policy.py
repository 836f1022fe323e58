"""Growth policy through real Airflow (``dag.test()``) on real Kafka: a topic under every
threshold is left alone (plan skipped, nothing written), a figure past its threshold grows the
topic by the computed factor, and the scheduled chain run twice in a row grows once.

The job of the whole-chain test is `fake_spark_submit.py` (tests/e2e run the real one)."""

from __future__ import annotations

import threading
from datetime import datetime

import pytest
from airflow.sdk import DAG
from airflow_env import task_instance_xcom, task_states
from confluent_kafka import Consumer, Producer, TopicPartition
from race_dags import build
from test_airflow_ownership import _launches, _spec, fake_spark  # noqa: F401 - fixture

from airflow_samza_expand.airflow.operators import (
    ExpandPartitionsOperator,
    PlanExpansionOperator,
)
from airflow_samza_expand.core.policy import GrowthPolicy, InvalidPolicyError
from airflow_samza_expand.dags import (
    GrowthSettings,
    JobSettings,
    build_expansion_dag,
    stream_job_args,
)

pytestmark = pytest.mark.kafka


def _policy_dag(j, policy) -> DAG:
    with DAG(dag_id=f"policy_{j.name}", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        plan = PlanExpansionOperator(
            task_id="plan", job_name=j.name, topics=[j.topic], policy=policy,
            check_partitioner=False,
        )
        expand = ExpandPartitionsOperator(
            task_id="expand",
            topic=j.topic,
            target_partitions="{{ ti.xcom_pull(task_ids='plan')['plan']['counts_after']['"
            + j.topic
            + "'] }}",
            job_name=j.name,
            expansion_id="{{ ti.xcom_pull(task_ids='plan')['expansion_id'] }}",
        )
        plan >> expand
    return dag


def _fill(config, topic: str, partition: int, records: int, value_bytes: int) -> None:
    producer = Producer(config)
    for i in range(records):
        producer.produce(topic, key=f"k{i}".encode(), value=b"v" * value_bytes,
                         partition=partition)
    assert producer.flush(30) == 0


def _commit_all(config, group: str, topic: str, admin) -> None:
    """The job (consumer group `group`) is caught up on every partition of `topic`."""
    n = admin.partition_counts([topic])[topic]
    ends = admin.high_watermarks({topic: list(range(n))})[topic]
    consumer = Consumer({**config, "group.id": group, "enable.auto.commit": "false"})
    try:
        consumer.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in ends.items()], asynchronous=False
        )
    finally:
        consumer.close()


def _expansion_records(j) -> list:
    j.store.refresh()
    return j.store.expansions()


def test_bad_policies_are_refused_at_parse_time(job):
    j = job(2, write_model=False)
    args = stream_job_args(
        job_name=j.name, bootstrap_servers="x:1", checkpoint_dir="/tmp/c", output_topic="o"
    )
    job = JobSettings(name=j.name, topics=[j.topic], application_args=args)
    for policy, refusal in [
        ({}, "no threshold"),
        ({"max_partition_bytes": -5}, "max_partition_bytes=-5 must be a positive"),
        ({"max_partition_bytes": 5, "max_factor": 6}, "max_factor=6 must be a power of two"),
    ]:
        with pytest.raises(InvalidPolicyError, match=refusal):
            build_expansion_dag("p", job=job, growth=GrowthSettings(policy=policy))
    with pytest.raises(ValueError, match="growth policy decides the factor itself"):
        PlanExpansionOperator(
            task_id="plan", job_name=j.name, targets={j.topic: 4},
            policy=GrowthPolicy(max_partition_bytes=5),
        )


def test_under_every_threshold_the_plan_is_skipped_and_nothing_changes(
    job, admin, kconfig, run_dag
):
    j = job(2)
    _fill(kconfig, j.topic, 0, 20, 50)
    policy = GrowthPolicy(
        max_partition_bytes=10_000, max_records_per_s_per_partition=1_000,
        max_lag_records=1_000, rate_window_s=1,
    )
    run = run_dag(_policy_dag(j, policy))
    states = task_states(run)
    assert states == {"plan": "skipped", "expand": "skipped"}, states
    assert admin.partition_counts([j.topic]) == {j.topic: 2}
    assert _expansion_records(j) == []
    assert j.store.get_lease("expansion") is None or j.store.get_lease("expansion").expired()
    assert [m.version for m in j.store.job_model_history()] == [1]


def test_a_partition_past_max_partition_bytes_grows_by_the_computed_factor(
    job, admin, kconfig, run_dag
):
    j = job(2)
    _fill(kconfig, j.topic, 0, 40, 98)  # 40 x (2-3 byte key + 98 bytes) ~ 4,000 bytes
    policy = GrowthPolicy(max_partition_bytes=1_500, max_factor=8, rate_window_s=1)
    run = run_dag(_policy_dag(j, policy))
    assert task_states(run) == {"plan": "success", "expand": "success"}
    assert admin.partition_counts([j.topic]) == {j.topic: 8}  # ~4,000 / 1,500 -> x4
    decision = task_instance_xcom(run, "plan")["policy"][0]
    assert decision["factor"] == 4 and decision["crossed"] == ["max_partition_bytes"]
    assert decision["figures"]["largest_partition"] == 0
    (record,) = _expansion_records(j)
    assert record.results["plan"]["policy"][0]["factor"] == 4  # the report reads it there


@pytest.mark.parametrize("figure", ["rate", "lag"])
def test_a_rate_or_growing_lag_past_its_threshold_grows_the_topic(
    figure, job, admin, kconfig, run_dag
):
    j = job(2)
    _fill(kconfig, j.topic, 1, 5, 10)
    _commit_all(kconfig, j.name, j.topic, admin)  # the job is caught up before the window
    if figure == "rate":
        policy = GrowthPolicy(max_records_per_s_per_partition=5, max_factor=2, rate_window_s=2)
    else:
        policy = GrowthPolicy(max_lag_records=10, lag_growing_for_s=2, max_factor=2)
    stop = threading.Event()

    def keep_producing() -> None:  # ~200 records/s into partition 0, the job commits nothing
        producer = Producer(kconfig)
        while not stop.is_set():
            for _ in range(20):
                producer.produce(j.topic, key=b"hot", value=b"x", partition=0)
            producer.flush(5)
            stop.wait(0.1)

    writer = threading.Thread(target=keep_producing, daemon=True)
    writer.start()
    try:
        run = run_dag(_policy_dag(j, policy))
    finally:
        stop.set()
        writer.join(30)
    assert task_states(run) == {"plan": "success", "expand": "success"}
    assert admin.partition_counts([j.topic]) == {j.topic: 4}
    decision = task_instance_xcom(run, "plan")["policy"][0]
    crossed = "max_records_per_s_per_partition" if figure == "rate" else "max_lag_records"
    assert decision["crossed"] == [crossed]
    if figure == "rate":
        assert decision["figures"]["busiest_partition"] == 0
    else:
        assert decision["figures"]["lag_growth_records"] > 0


def test_scheduled_chain_run_twice_in_a_row_grows_once(
    job, admin, kconfig, fake_spark, tmp_path, kafka_bootstrap, run_dag  # noqa: F811
):
    j = job(2)
    _fill(kconfig, j.topic, 0, 40, 98)
    _commit_all(kconfig, j.name, j.topic, admin)  # caught up: the barrier passes at once
    policy = GrowthPolicy(max_partition_bytes=1_500, max_factor=2, rate_window_s=1)
    dag = build(**_spec(j, tmp_path, kafka_bootstrap, f"sched_{j.name}", growth={"policy": policy}))

    first = run_dag(dag, logical_date=datetime.fromisoformat("2026-01-01T00:00:00+00:00"))
    assert str(first.state) == "success", task_states(first)
    assert admin.partition_counts([j.topic]) == {j.topic: 4}
    assert task_instance_xcom(first, "report")["policy"][0]["factor"] == 2

    second = run_dag(dag, logical_date=datetime.fromisoformat("2026-01-01T01:00:00+00:00"))
    states = task_states(second)
    assert str(second.state) == "success", states
    assert states["plan"] == "skipped" and states["expand"] == "skipped", states
    assert admin.partition_counts([j.topic]) == {j.topic: 4}  # the new figures are under
    assert len(_launches(fake_spark)) == 1
    assert [m.version for m in j.store.job_model_history()] == [1, 2]
