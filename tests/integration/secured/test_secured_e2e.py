"""End to end on the secured Apache Kafka (SASL/SCRAM, ACLs enforced) under live traffic, each
actor with exactly its least-privilege ACLs (kafka.acls): the demo's principal creates the
topics and produces; the PySpark job (real Spark, local[2]) runs as `spark-job`, reading its
Kafka settings from an owner-only --kafka-config file; the expansion DAG (dag.test()) runs as
`airflow` through a SASL `kafka_default`, and starts the restarted job with the job's own
connection (`job_kafka_config_id`). Then no password of any principal is in a task log, an
XCom, a coordinator record, a process's argument list or any file but the 0600 config files.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "airflow"))
import airflow_env  # noqa: E402,I001 - sets a temporary AIRFLOW_HOME before airflow is imported

pytest.importorskip("pyspark")

from confluent_kafka import Consumer, KafkaError, TopicPartition  # noqa: E402

from airflow_samza_expand._demo.jobs import (  # noqa: E402
    LOCAL_SPARK_CONF,
    StreamJob,
    committed_total,
    running_processors,
    spark_connection_env,
    spark_env,
    wait_for,
)
from airflow_samza_expand._demo.producer import KeyedProducer  # noqa: E402
from airflow_samza_expand._kafka.acls import resolve  # noqa: E402
from airflow_samza_expand._kafka.admin import KafkaAdmin  # noqa: E402
from airflow_samza_expand._kafka.config_file import job_kafka_args, write_config_file  # noqa: E402
from airflow_samza_expand.core.model import JobModel  # noqa: E402
from airflow_samza_expand.dags import build_expansion_dag, stream_job_args  # noqa: E402
from airflow_samza_expand.store import coordinator_topic  # noqa: E402
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(1200)]

CHAIN_OK = {"plan", "expand", "barrier", "stop_job", "write_job_model", "submit", "ack"}


def _connection_env(config: dict[str, str]) -> str:
    return json.dumps({"conn_type": "kafka", "extra": dict(config)})


def _coordinator_bytes(config: dict[str, str], topic: str) -> bytes:
    consumer = Consumer({**config, "group.id": "secrets-check", "enable.partition.eof": "true"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen = b""
        while True:
            message = consumer.poll(10)
            assert message is not None, "coordinator topic not read to its end"
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return seen
                continue
            seen += (message.key() or b"") + (message.value() or b"")
    finally:
        consumer.close()


def _argument_lists() -> list[bytes]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                found.append(Path(f"/proc/{pid}/cmdline").read_bytes())
            except OSError:
                continue
    return found


def test_secured_expansion_end_to_end_with_least_privilege(
    principal, admin_config, tmp_path, caplog, capfd
) -> None:
    suffix = str(time.monotonic_ns())[-8:]
    job, topic, output = f"sec-{suffix}", f"sec-{suffix}-orders", f"sec-{suffix}-counts"
    names = {"job": job, "inputs": [topic], "output": output}
    demo = principal(resolve("demo", **names), name="demo")
    airflow = principal(resolve("airflow", **names), name="airflow")
    spark = principal(resolve("spark-job", **names), name="job")
    passwords = [c["sasl.password"] for c in (demo, airflow, spark)]
    logs, checkpoint = tmp_path / "logs", str(tmp_path / "checkpoint")

    airflow_env.migrate_airflow_db()
    saved = {k: os.environ.get(k) for k in ("AIRFLOW_CONN_KAFKA_DEFAULT",
             "AIRFLOW_CONN_KAFKA_SPARK_JOB", "AIRFLOW_CONN_SPARK_DEFAULT", "PATH")}  # fmt: skip
    os.environ["AIRFLOW_CONN_KAFKA_DEFAULT"] = _connection_env(airflow)
    os.environ["AIRFLOW_CONN_KAFKA_SPARK_JOB"] = _connection_env(spark)
    os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = spark_connection_env("local[2]")
    os.environ["PATH"] = spark_env()["PATH"]

    with KafkaAdmin(demo) as admin:
        admin.ensure_topic(topic, 2, replication_factor=1)
        admin.ensure_topic(output, 1, replication_factor=1)
    producer = KeyedProducer(demo, topic, keys=20, rate=40.0, refresh_ms=1000).start()
    store = KafkaCoordinatorStore(airflow, job)
    admin = KafkaAdmin(airflow)
    args = stream_job_args(
        job_name=job, checkpoint_dir=checkpoint, output_topic=output,
        trigger="processing-time=500ms",
        extra=["--shuffle-partitions", "2", "--max-records-per-batch", "5000"],
    )  # fmt: skip
    first = StreamJob(job, [*args, *job_kafka_args(write_config_file(spark, logs))], str(logs))
    run = None
    try:
        store.write_job_model(JobModel.initial(job, {topic: 2}))
        first.launch()
        wait_for("the v1 job", lambda: running_processors(store, 1), timeout_s=300)
        wait_for("a v1 commit", lambda: committed_total(admin, job, topic) > 0, timeout_s=300)

        from airflow_samza_expand import dags

        dag = build_expansion_dag(
            f"secured_{suffix}",
            job=dags.JobSettings(name=job, topics=[topic], application_args=args),
            spark=dags.SparkSettings(
                conf=LOCAL_SPARK_CONF, env_vars={"PYSPARK_PYTHON": spark_env()["PYSPARK_PYTHON"]},
                submit_kwargs={"job_kafka_config_id": "kafka_spark_job"}, log_dir=str(logs)),
            barrier=dags.BarrierSettings(producer_refresh_grace_s=3.0, barrier_timeout_s=600),
            # a restart, not the in-place switch `auto` picks for the shipped job: the launch
            # of v2 is what gets the job's Kafka secrets, the path this test checks
            restart=dags.RestartSettings(restart="warm", stop_timeout_s=300, ack_timeout_s=600),
            poll_interval_s=1.0, retries=0,
        )  # fmt: skip
        run = airflow_env.run_dag_test(dag)
        states = airflow_env.task_states(run)
        airflow_env.assert_run_succeeded(run, capfd)
        assert {t for t, s in states.items() if s == "success"} >= CHAIN_OK, states
        assert store.latest_job_model().partition_counts() == {topic: 4}
        wait_for("v2 commits on the new partitions", lambda: all(
            (admin.group_offsets(job, {topic: [2, 3]})[topic][p] or 0) > 0 for p in (2, 3)
        ), timeout_s=300)  # fmt: skip
        arguments = _argument_lists()
        xcoms = json.dumps([airflow_env.task_instance_xcom(run, t) for t in states], default=str)
    finally:
        producer.stop()
        store.request_stop(99, "test over")
        wait_for("the jobs to stop", lambda: all(
            p.get("state") in ("stopped", "failed") for p in store.processors().values()
        ), timeout_s=180)  # fmt: skip
        first.terminate()
        store.close()
        admin.close()
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
    assert producer.errors == []

    records = _coordinator_bytes(admin_config, coordinator_topic(job))
    out, err = capfd.readouterr()
    files = [p for root in (tmp_path, Path(airflow_env.AIRFLOW_HOME)) for p in root.rglob("*")
             if p.is_file()]  # fmt: skip
    config_files = 0
    for secret in passwords:
        assert secret not in xcoms
        assert secret.encode() not in records
        assert secret not in caplog.text and secret not in out and secret not in err
        assert not any(secret.encode() in a for a in arguments)
        for path in files:
            if secret.encode() in path.read_bytes():
                assert path.name.startswith("kafka-client-"), path
                assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
                config_files += 1
    assert config_files >= 2  # v1 (the test's) and v2 (the standby launch's)
