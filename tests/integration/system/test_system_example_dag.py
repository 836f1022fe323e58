"""System test: the example DAG ``dags/samza_expand.py`` against a real Kafka and Spark master.

Not in the README's test command: tests/e2e runs the same chain (the factory's, under live
traffic, both run modes, on Apache Kafka) with the real job, so a second local run of it only
cost CI time. It runs when a stack is named (``KAFKA_BOOTSTRAP_SERVERS`` or
``SPARK_MASTER_URL``) or with ``SAMZA_EXPAND_SYSTEM_TESTS=1`` (then on the test session's Kafka
and ``local[2]``):

* ``KAFKA_BOOTSTRAP_SERVERS`` - e.g. ``kafka:9092`` inside the docker stack (docker/compose.yaml);
* ``SPARK_MASTER_URL`` - e.g. ``spark://spark-master:7077`` (default ``local[2]``);
* ``CHECKPOINT_ROOT`` - required for a cluster master: a directory the Spark workers share with
  this process (the stack mounts the ``checkpoints`` volume at ``/checkpoints``).

In the stack: ``docker compose -f docker/compose.yaml --profile test run --rm system-test``.

Scenario, for each run mode of the example DAG (``continuous``, ``available-now``): a keyed
producer with per-key sequence numbers (librdkafka's default partitioner, 2 s metadata refresh)
writes to a 2-partition topic before and while the DAG grows it to 4; the DAG runs with
``dag.test()`` (its Kafka and Spark connections pointing at the given cluster) and the shipped
PySpark job. Then: every task succeeded, job model history is v1, v2 with the SEP-5 mapping,
every key's final count equals what was produced for it with no sequence violation, and the
job consumed the new partitions.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
EXAMPLE_DAG = REPO / "dags" / "samza_expand.py"
SPARK_MASTER = os.environ.get("SPARK_MASTER_URL") or "local[2]"
PRODUCER_REFRESH_MS = 2000
GRACE_S = 10
KEYS = 12

SYSTEM_RUN = bool(
    os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    or os.environ.get("SPARK_MASTER_URL")
    or os.environ.get("SAMZA_EXPAND_SYSTEM_TESTS") == "1"
)

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(
        not SYSTEM_RUN,
        reason="system test against a named stack: set KAFKA_BOOTSTRAP_SERVERS / SPARK_MASTER_URL "
        "or SAMZA_EXPAND_SYSTEM_TESTS=1 (tests/e2e runs the same chain in the default suite)",
    ),
]


def spark_connection(master: str) -> str:
    """``AIRFLOW_CONN_SPARK_DEFAULT`` for a master URL (client deploy mode)."""
    if master.startswith("spark://"):
        host, _, port = master[len("spark://") :].partition(":")
        doc: dict[str, Any] = {"conn_type": "spark", "host": f"spark://{host}"}
        if port:
            doc["port"] = int(port)
    else:
        doc = {"conn_type": "spark", "host": master}
    doc["extra"] = {"deploy-mode": "client"}
    return json.dumps(doc)


class SequencedProducer(threading.Thread):
    """Keyed records ``{"key", "seq"}`` at a steady rate until stopped; counts what it sent.

    Stops by itself once `after_new` records went to partitions the topic did not have at start
    (so the run covers producing before and after the growth) or after `max_s` seconds.
    """

    def __init__(
        self, bootstrap: str, topic: str, keys: list[str], *, after_new: int, max_s: float
    ) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Producer

        self.topic = topic
        self.keys = keys
        self.after_new = after_new
        self.max_s = max_s
        self.sent = dict.fromkeys(keys, 0)
        self.per_partition: dict[int, int] = {}
        self.errors: list[str] = []
        self.stop_event = threading.Event()
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": "true",
                "acks": "all",
                "linger.ms": "5",
                "topic.metadata.refresh.interval.ms": str(PRODUCER_REFRESH_MS),
            }
        )

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.per_partition[msg.partition()] = self.per_partition.get(msg.partition(), 0) + 1

    def produce_round(self) -> None:
        for key in self.keys:
            value = json.dumps({"key": key, "seq": self.sent[key]})
            self.producer.produce(
                self.topic, key=key.encode(), value=value.encode(), on_delivery=self._delivered
            )
            self.sent[key] += 1
        self.producer.poll(0)

    def new_partition_records(self, old_count: int) -> int:
        return sum(n for p, n in self.per_partition.items() if p >= old_count)

    def run(self) -> None:
        deadline = time.monotonic() + self.max_s
        while not self.stop_event.is_set() and time.monotonic() < deadline:
            self.produce_round()
            if self.new_partition_records(2) >= self.after_new:
                break
            time.sleep(0.2)
        self.producer.flush(30)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(60)
        self.producer.flush(30)


def read_final_outputs(config: dict[str, str], topic: str) -> dict[str, dict[str, Any]]:
    """The last output per key, and a check that no key's count ever went back."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**config, "group.id": f"system-test-reader-{uuid.uuid4().hex[:8]}"})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        consumer.assign([TopicPartition(topic, 0, 0)])
        last: dict[str, dict[str, Any]] = {}
        seen = 0
        deadline = time.monotonic() + 120
        while seen < high and time.monotonic() < deadline:
            for message in consumer.consume(1000, 1.0):
                if message.error() is not None:
                    continue
                seen += 1
                doc = json.loads(message.value())
                previous = last.get(doc["key"])
                assert previous is None or doc["count"] >= previous["count"], (
                    f"count of key {doc['key']} went back: {previous} -> {doc}"
                )
                last[doc["key"]] = doc
        return last
    finally:
        consumer.close()


def wait_until(what: str, check: Any, timeout_s: float, interval_s: float = 2.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        print(f"[system-test] waiting for {what}", flush=True)
        time.sleep(interval_s)


def load_example_dag(module_name: str) -> Any:
    spec = importlib.util.spec_from_file_location(module_name, EXAMPLE_DAG)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def stop_job(store: Any, version: int, handle: Any | None) -> None:
    """Stop a continuous job through the coordinator (as the DAG does); kill as a last resort."""
    from airflow_samza_expand._protocol.job import launch as detached

    store.request_stop(version, "system test finished")
    try:
        wait_until(
            f"processors of job model v{version} to stop",
            lambda: (
                not [
                    p
                    for p in store.processors().values()
                    if p.get("job_model_version") == version
                    and p.get("state") in ("starting", "running", "stopping")
                ]
            ),
            timeout_s=180,
        )
    finally:
        if handle is not None and detached.is_running(handle):
            detached.terminate(handle)


@pytest.mark.parametrize("run_mode", ["continuous", "available-now"])
def test_example_dag_expands_live_job_on_real_cluster(
    run_mode: str,
    kafka_bootstrap: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    bootstrap = kafka_bootstrap  # KAFKA_BOOTSTRAP_SERVERS, else the development broker
    checkpoint_root = os.environ.get("CHECKPOINT_ROOT")
    if not checkpoint_root:
        if not SPARK_MASTER.startswith("local"):
            pytest.skip(
                f"SPARK_MASTER_URL={SPARK_MASTER} is a cluster: set CHECKPOINT_ROOT to a "
                "directory its workers share with this process (the stack uses /checkpoints)"
            )
        checkpoint_root = str(tmp_path / "checkpoints")
    # Airflow must not be imported before its temporary home is set (tests/airflow/airflow_env).
    sys.path.insert(0, str(REPO / "tests" / "airflow"))
    import airflow_env

    from airflow_samza_expand._demo.jobs import spark_env
    from airflow_samza_expand._kafka.admin import KafkaAdmin
    from airflow_samza_expand._kafka.config import client_config
    from airflow_samza_expand._protocol.job import launch as detached
    from airflow_samza_expand.core.model import JobModel
    from airflow_samza_expand.dags._factory import DEFAULT_APPLICATION, stream_job_args
    from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

    suffix = uuid.uuid4().hex[:8]
    job_name = f"systest-{suffix}"
    topic = f"systest-orders-{suffix}"
    output_topic = f"systest-counts-{suffix}"
    config = client_config(bootstrap)
    admin = KafkaAdmin(config, timeout_s=30)
    store = KafkaCoordinatorStore(config, job_name)
    handles: dict[int, Any] = {}  # job model version -> detached job handle
    try:
        admin.ensure_topic(topic, 2)
        admin.ensure_topic(output_topic, 1)
        store.write_job_model(JobModel.initial(job_name, {topic: 2}, created_by="system-test"))

        keys = [f"k{i}" for i in range(KEYS)]
        producer = SequencedProducer(bootstrap, topic, keys, after_new=5 * KEYS, max_s=900)
        for _ in range(20):  # history before the job starts
            producer.produce_round()
        producer.producer.flush(30)

        kafka_conn = airflow_env.kafka_connection_env(bootstrap)
        monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DEFAULT", kafka_conn)
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", spark_connection(SPARK_MASTER))
        monkeypatch.setenv("SAMZA_EXPAND_BOOTSTRAP_SERVERS", bootstrap)
        monkeypatch.setenv("SAMZA_EXPAND_CHECKPOINT_ROOT", checkpoint_root)
        monkeypatch.setenv("SAMZA_EXPAND_OUTPUT_TOPIC", output_topic)
        monkeypatch.setenv("SAMZA_EXPAND_RUN_MODE", run_mode)
        monkeypatch.setenv("PYSPARK_PYTHON", os.environ.get("PYSPARK_PYTHON", sys.executable))
        monkeypatch.setenv("PATH", spark_env()["PATH"])  # spark-submit beside this interpreter

        if run_mode == "continuous":  # the live job on v1, as the stack's stream-job runs it
            args = stream_job_args(
                job_name=job_name,
                bootstrap_servers=bootstrap,
                checkpoint_dir=os.path.join(checkpoint_root, job_name),
                output_topic=output_topic,
            )
            command = ["spark-submit", "--master", SPARK_MASTER, DEFAULT_APPLICATION, *args]
            handles[1] = detached.launch(command, log_path=str(tmp_path / "job-v1.log"))
            wait_until(
                "the v1 job to heartbeat running",
                lambda: any(p.get("state") == "running" for p in store.processors().values()),
                timeout_s=300,
            )
        producer.start()  # keeps producing while the DAG grows the topic

        dag = load_example_dag(f"samza_expand_system_{suffix}")
        dag_run = airflow_env.run_dag_test(
            dag,
            run_conf={
                "topic": topic,
                "factor": 2,
                "job_name": job_name,
                "grace_seconds": GRACE_S,
                "barrier_timeout_seconds": 900,
                "dry_run": False,
            },
        )
        producer.stop()
        submitted = airflow_env.task_instance_xcom(dag_run, "submit") or {}
        if submitted.get("detached"):
            handles[2] = submitted
        assert not producer.errors, producer.errors[:3]

        states = airflow_env.task_states(dag_run)
        airflow_env.assert_run_succeeded(dag_run, capfd)
        assert set(states.values()) == {"success"}, states

        history = store.job_model_history()
        assert [m.version for m in history] == [1, 2]
        v2 = history[-1]
        assert v2.partition_counts() == {topic: 4}
        assert {t: sorted(s.partition for s in ssps) for t, ssps in v2.task_to_ssps().items()} == {
            "Partition 0": [0, 2],
            "Partition 1": [1, 3],
        }
        assert admin.partition_counts([topic]) == {topic: 4}
        assert producer.new_partition_records(2) > 0, producer.per_partition

        ends = admin.high_watermarks({topic: range(4)})[topic]
        if run_mode == "continuous":
            wait_until(
                "the restarted job to commit every partition's end",
                lambda: all(
                    (admin.group_offsets(job_name, {topic: [p]})[topic].get(p) or 0) >= end
                    for p, end in ends.items()
                ),
                timeout_s=600,
                interval_s=5,
            )
            stop_job(store, 2, handles.pop(2, None))
        committed = admin.group_offsets(job_name, {topic: list(range(4))})[topic]
        assert committed == ends, (committed, ends)
        assert ends[2] + ends[3] > 0, ends  # the new partitions were read

        final = read_final_outputs(config, output_topic)
        assert sorted(final) == sorted(keys)
        assert {k: final[k]["count"] for k in keys} == producer.sent
        assert {k: final[k]["violations"] for k in keys} == dict.fromkeys(keys, 0)
        report = airflow_env.task_instance_xcom(dag_run, "report")
        print(f"[system-test] {run_mode} report: {json.dumps(report, default=str)[:2000]}")
    finally:
        for version, handle in sorted(handles.items()):
            if detached.is_running(handle):
                stop_job(store, version, handle)
        store.close()
        admin.close()
