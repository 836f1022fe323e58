"""Processors of one job as separate processes (own JVM, own process group) for lease tests."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from spark_helpers import committed, create_topic

from airflow_samza_expand._testing.processors import JobProcess
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store import open_store

TTL_S = 6.0  # Kafka's minimum session timeout: the fastest failover
WAIT_S = 300.0


def wait_for(condition: Any, what: str, timeout_s: float = WAIT_S, procs: tuple = ()) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        for proc in procs:
            if proc.popen.poll() is not None and proc.expect_running:
                raise AssertionError(f"{proc.pid_name} exited early:\n{proc.tail()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.25)


class JobSetup:
    """Topics, coordinator store and checkpoint of one job."""

    def __init__(self, bootstrap: str, unique_topic: Any, tmp_path: Path, partitions: int = 2):
        self.bootstrap = bootstrap
        self.topic, self.output = unique_topic("in"), unique_topic("out")
        self.name = "job-" + self.topic
        self.partitions = partitions
        create_topic(bootstrap, self.topic, partitions)
        create_topic(bootstrap, self.output, 1)
        self.tmp = tmp_path
        self.coordinator = str(tmp_path / "coordinator")
        self.checkpoint = str(tmp_path / "checkpoint")
        self.store = open_store(self.coordinator, self.name)
        self.store.write_job_model(JobModel.initial(self.name, {self.topic: partitions}))

    def committed_total(self) -> int:
        offsets = committed(self.bootstrap, self.name, self.topic, self.partitions)
        return sum(max(o, 0) for o in offsets.values())

    def processor(self, pid: str) -> dict:
        return self.store.processors().get(pid) or {}

    def start(self, pid: str, *extra: str) -> Processor:
        return Processor(self, pid, list(extra))


class Processor(JobProcess):
    """One processor of ``job`` (python job.py --master local[2]) in its own process group."""

    def __init__(self, job: JobSetup, pid: str, extra: list[str]) -> None:
        self.pid_name = pid
        args = [
            "--master", "local[2]",
            "--job-name", job.name, "--bootstrap-servers", job.bootstrap,
            "--coordinator", job.coordinator, "--checkpoint-dir", job.checkpoint,
            "--output-topic", job.output, "--processor-id", pid, "--ttl", str(TTL_S),
            "--trigger", "processing-time=1s", "--max-records-per-batch", "200",
            "--shuffle-partitions", "2", "--spark-conf", "spark.ui.enabled=false",
            *extra,
        ]  # fmt: skip
        super().__init__(pid, args, job.tmp / f"{pid}.log")
