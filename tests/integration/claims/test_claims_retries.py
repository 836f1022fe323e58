"""Refusals fail at once, transient faults are retried: as Airflow runs them (`dag.test()` with
the factory's `retries=2`, 1 s apart), not as a call of `execute()` on a stand-in task."""

from __future__ import annotations

import pytest
from claims_helpers import expansion_dag, point_kafka_default, produce_keyed, run_until, tries

from airflow_samza_expand._kafka.admin import KafkaAdmin

pytestmark = [pytest.mark.kafka]

KEYS = [f"key-{i}" for i in range(60)]


def test_partitioner_mismatch_fails_on_the_first_try(kafka_default, make_job) -> None:
    job = make_job(kafka_default)
    produce_keyed(job.config, job.topic, KEYS, partition_count=2)  # misplaced
    run = run_until(expansion_dag(job), "expand")
    assert tries(run)["plan"] == ("failed", 1)  # not up_for_retry, no second try
    assert "expand" not in tries(run) or tries(run)["expand"][0] != "success"
    with KafkaAdmin(job.config, timeout_s=15) as admin:
        assert admin.partition_counts([job.topic]) == {job.topic: 2}  # nothing changed
    assert [m.version for m in job.store.job_model_history()] == [1]


def test_corrupt_coordinator_record_fails_on_the_first_try(kafka_default, make_job) -> None:
    from confluent_kafka import Producer

    from airflow_samza_expand.store import coordinator_topic

    job = make_job(kafka_default)
    produce_keyed(job.config, job.topic, KEYS)
    # a candidate for job model v2 whose value is not a job model (README: record keys)
    producer = Producer(job.config)
    key = b'{"key":"2","type":"job-model","writer":"someone"}'
    producer.produce(coordinator_topic(job.name), key=key, value=b'{"version": 2, "trunc')
    assert producer.flush(30) == 0
    run = run_until(expansion_dag(job), "expand")
    assert tries(run)["plan"] == ("failed", 1)
    with KafkaAdmin(job.config, timeout_s=15) as admin:
        assert admin.partition_counts([job.topic]) == {job.topic: 2}


def test_broker_outage_is_retried_and_succeeds_when_the_broker_returns(
    tmp_path, kafka_default, make_job
) -> None:
    """A development broker of this test's own (own port, own data dir) is down when the plan
    task first runs; Airflow's retry callback starts it again, and the second try succeeds."""
    from airflow_samza_expand._testing import DevBrokerProcess

    broker = DevBrokerProcess(data_dir=tmp_path / "data", log_path=tmp_path / "broker.log")
    broker.start()
    try:
        point_kafka_default(broker.bootstrap)
        job = make_job(broker.bootstrap)
        produce_keyed(job.config, job.topic, KEYS)
        dag = expansion_dag(job)
        plan = dag.task_dict["plan"]
        plan.request_timeout_s = 5.0  # the first try gives up on the absent broker sooner
        retried: list[str] = []

        def broker_returns(context) -> None:
            retried.append(context["ti"].task_id)
            broker.start()  # same port, same data

        plan.on_retry_callback = [broker_returns]
        broker.stop()
        run = run_until(dag, "expand")
        assert retried == ["plan"]
        states = tries(run)
        assert states["plan"] == ("success", 2), states
        assert states["expand"] == ("success", 1), states
        with KafkaAdmin(job.config, timeout_s=15) as admin:
            assert admin.partition_counts([job.topic]) == {job.topic: 4}
    finally:
        broker.close()
