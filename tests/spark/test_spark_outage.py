"""The example user job (`examples/user_job.py`: Spark's own Kafka source, ``job.run(start)``,
its coordinator store on Kafka) rides out a broker outage longer than its lease: Apache Kafka
stopped for 30 s while the job runs, then started again on its data. The job is fenced (its
query stopped, no commit without the lease), takes the lease again and starts its query anew
by itself: still alive, every key's count exact and in order, nothing counted twice.
docs/operations.md, "A broker outage"."""

from __future__ import annotations

import threading
import time

import pytest
from spark_helpers import committed, create_topic, produce_sequenced, read_latest_outputs
from test_spark_runtime import _spark_kafka, _user_job

from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store import open_store

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(900)]

TTL_S = 15.0
OUTAGE_S = 30.0
WAIT_S = 240.0
KEYS = [f"key-{i}" for i in range(20)]


def wait_for(condition, what: str, thread: threading.Thread) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert thread.is_alive(), f"the job ended while waiting for {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def test_the_user_job_rides_out_a_broker_outage_longer_than_its_lease(
    spark, restartable_apache_kafka, tmp_path
):
    broker = restartable_apache_kafka
    _spark_kafka(spark)
    bootstrap = broker.bootstrap
    topic, output, name = "orders", "counts", "outage-job"
    create_topic(bootstrap, topic, 2)
    create_topic(bootstrap, output, 1)
    store = open_store("kafka", name, {"bootstrap.servers": bootstrap})
    store.write_job_model(JobModel.initial(name, {topic: 2}))
    argv = [
        "--job-name", name, "--bootstrap-servers", bootstrap, "--coordinator", "kafka",
        "--checkpoint-dir", str(tmp_path / "checkpoint"), "--output-topic", output,
        "--trigger", "processing-time=1s", "--processor-id", "user-1", "--ttl", str(TTL_S),
        "--source", "kafka", "--shuffle-partitions", "2",
    ]  # fmt: skip
    result: dict = {}
    thread = threading.Thread(
        target=lambda: result.setdefault("code", _user_job().main(argv)), daemon=True
    )
    thread.start()
    try:
        total = lambda: sum(committed(bootstrap, name, topic, 2).values())  # noqa: E731
        seqs = produce_sequenced(bootstrap, topic, KEYS, 10)
        wait_for(lambda: total() == 200, "200 records committed", thread)

        broker.stop()
        threading.Event().wait(OUTAGE_S)  # the outage: nothing to wait on but its length
        assert thread.is_alive(), f"the job ended during the outage: {result}"
        broker.start()  # same port, same data

        produce_sequenced(bootstrap, topic, KEYS, 10, first_seq=seqs)
        wait_for(lambda: total() == 400, "400 records committed after the outage", thread)
        outputs = read_latest_outputs(bootstrap, output)
        assert {k: (o["count"], o["last_seq"], o["violations"]) for k, o in outputs.items()} == {
            k: (20, 19, 0) for k in KEYS
        }
        proc = store.processors()["user-1"]
        assert (proc["state"], proc["role"]) == ("running", "active")
    finally:
        store.request_stop(1, "test over")
        thread.join(120)
        store.close()
    assert result == {"code": 0}
