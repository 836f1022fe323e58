"""Apache Kafka restarted (stopped and started on its data directory) in the middle of an
expansion, through a real Airflow run (``dag.test()`` in a process of its own): while the
barrier waits, deferred, the broker goes away and comes back. The deferred wait rides it out;
a step that meets the broker still electing leaders is retried by Airflow (a transient fault,
never a refusal); the expansion completes once; the job (`fake_spark_submit.py`, which rides
out the outage as the real job does) runs v2.

The broker is this test's own (a restart would disturb the rest of the run), so the test
needs Apache Kafka's jars (fetched by scripts/setup.sh) whatever Kafka the run uses.
"""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import airflow_env
import pytest
import test_airflow_faults as faults
import test_airflow_handover as handover
import test_airflow_ownership as ownership
from race_dags import build

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(600)]
fake_spark = ownership.fake_spark  # the fake spark-submit on PATH (fixture)


def test_a_broker_restart_during_the_barrier_is_ridden_out(
    restartable_apache_kafka, fake_spark, tmp_path, monkeypatch
):
    bootstrap = restartable_apache_kafka.bootstrap
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DEFAULT", airflow_env.kafka_connection_env(bootstrap))
    config = client_config(bootstrap)
    admin = KafkaAdmin(config, timeout_s=30)
    name, topic = f"job-{uuid.uuid4().hex[:10]}", f"orders-{uuid.uuid4().hex[:8]}"
    admin.ensure_topic(topic, 2)
    store = KafkaCoordinatorStore(config, name)
    store.write_job_model(JobModel.initial(name, {topic: 2}))
    j = SimpleNamespace(name=name, topic=topic, store=store)
    # a step that meets the broker still electing leaders fails transiently: Airflow's retry
    # takes it (the expansion's steps are idempotent), as a deployment's retries would
    spec = ownership._spec(
        j,
        tmp_path,
        bootstrap,
        f"restart_{name}",
        barrier={"producer_refresh_grace_s": 6.0},
        retries=3,
    )
    airflow_env.serialize_dag_to_db(build(**spec))
    v1 = handover._start_v1(j, tmp_path, bootstrap)
    run, _ = faults._run(spec, faults.A_DATE, tmp_path)
    try:
        faults._when_step_began(run, j, "barrier")
        restartable_apache_kafka.restart()  # SIGTERM, then the same ports and data directory
        result = faults._result(run, tmp_path)
    finally:
        faults._stop(run, v1)
    try:
        assert set(result["tasks"].values()) == {"success"}, result
        (record,) = store.expansions()
        faults._expanded_once(j, admin, fake_spark, record.expansion_id, max_launches=1)
    finally:
        store.close()
