"""The job as spark-submit runs it (the file path SparkSubmitOperator gets), killed mid-stream."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from spark_helpers import committed, create_topic, produce_sequenced, read_latest_outputs

import airflow_samza_expand.spark.job as job_module
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.spark.job import main
from airflow_samza_expand.store import open_store

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]

SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"


@pytest.mark.skipif(not SPARK_SUBMIT.exists(), reason="spark-submit not installed beside python")
def test_killed_spark_submit_job_resumes_without_double_counting(
    spark, kafka_bootstrap, unique_topic, tmp_path
) -> None:
    topic, output = unique_topic("in"), unique_topic("out")
    create_topic(kafka_bootstrap, topic, 2)
    create_topic(kafka_bootstrap, output, 1)
    keys = [f"key-{i}" for i in range(30)]
    produce_sequenced(kafka_bootstrap, topic, keys, 100)  # 3,000 records
    name = "job-" + topic
    coordinator, checkpoint = str(tmp_path / "coordinator"), str(tmp_path / "checkpoint")
    store = open_store(coordinator, name)
    store.write_job_model(JobModel.initial(name, {topic: 2}))
    args = [
        "--job-name", name, "--bootstrap-servers", kafka_bootstrap,
        "--coordinator", coordinator, "--checkpoint-dir", checkpoint,
        "--output-topic", output, "--processor-id", "proc-1",
    ]  # fmt: skip
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    log_path = tmp_path / "spark-submit.log"
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(
            [str(SPARK_SUBMIT), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
             job_module.__file__, *args, "--trigger", "processing-time=200ms",
             "--max-records-per-batch", "300", "--shuffle-partitions", "2"],
            stdout=log_file, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 300
            done = 0
            while time.monotonic() < deadline:
                done = sum(committed(kafka_bootstrap, name, topic, 2).values())
                if done >= 300:  # the first micro-batch is committed
                    break
                assert proc.poll() is None, log_path.read_text()[-3000:]
                time.sleep(0.2)
            else:
                pytest.fail(f"no progress past {done} records: {log_path.read_text()[-3000:]}")
        finally:
            os.killpg(proc.pid, signal.SIGKILL)  # the process group this test started
            proc.wait(30)
    assert done < 3000, "the job finished before the kill; the test proves nothing"
    # Restart on the same checkpoint: counts are exact, nothing counted twice or lost.
    assert main([*args, "--trigger", "available-now"], spark=spark) == 0
    outputs = read_latest_outputs(kafka_bootstrap, output)
    got = {(o["count"], o["last_seq"], o["violations"]) for o in outputs.values()}
    assert got == {(100, 99, 0)}
    assert set(outputs) == set(keys)
    assert sum(committed(kafka_bootstrap, name, topic, 2).values()) == 3000
