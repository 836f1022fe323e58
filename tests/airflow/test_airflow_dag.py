"""A small expansion DAG through ``dag.test()`` (serialized first, see ``airflow_env``): plan ->
expand -> barrier (deferred, its trigger run in line) -> stop -> write job model -> ack, with a
thread playing the stateful job on the coordinator store (heartbeats, stop, restart at vN+1)."""

from __future__ import annotations

import threading
import time
from datetime import datetime

import pytest
from airflow.sdk import DAG
from airflow_env import task_instance_xcom, task_states
from kafka_helpers import commit_offsets, produce_keyed

from airflow_samza_expand.airflow.operators import (
    ExpandPartitionsOperator,
    PlanExpansionOperator,
    StopStatefulJobOperator,
    WriteJobModelOperator,
)
from airflow_samza_expand.airflow.sensors import JobModelAckSensor, OrderingBarrierSensor
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

pytestmark = pytest.mark.kafka

EXPANSION_ID = "{{ ti.xcom_pull(task_ids='plan')['expansion_id'] }}"


class FakeStatefulJob(threading.Thread):
    """Plays the job's side of the restart protocol through its own coordinator store client:
    runs v1, stops when asked, restarts when v2 appears and heartbeats running v2."""

    def __init__(self, config, job_name: str) -> None:
        super().__init__(daemon=True)
        self.store = KafkaCoordinatorStore(config, job_name)
        self.done = threading.Event()
        self.store.heartbeat("processor-0", 1, "running")

    def run(self) -> None:
        deadline = time.monotonic() + 240
        try:
            while time.monotonic() < deadline and not self.done.is_set():
                stop = self.store.stop_request()
                if stop and stop["version"] == 1:
                    self.store.heartbeat("processor-0", 1, "stopped")
                    break
                time.sleep(0.3)
            while time.monotonic() < deadline and not self.done.is_set():
                model = self.store.latest_job_model()
                if model.version == 2:
                    self.store.heartbeat("processor-0", 2, "running")
                    return
                time.sleep(0.3)
        finally:
            self.store.close()


def build_dag(job_name: str, topic: str) -> DAG:
    with DAG(
        dag_id=f"expand_{job_name}",
        schedule=None,
        start_date=datetime(2026, 1, 1),
        catchup=False,
    ) as dag:
        plan = PlanExpansionOperator(task_id="plan", job_name=job_name, targets={topic: 4})
        expand = ExpandPartitionsOperator(
            task_id="expand",
            topic=topic,
            factor=2,
            job_name=job_name,
            expansion_id=EXPANSION_ID,
        )
        barrier = OrderingBarrierSensor(
            task_id="barrier",
            job_name=job_name,
            expansion_id=EXPANSION_ID,
            producer_refresh_grace_s=1.0,
            poke_interval=0.5,
            deferrable=True,
        )
        stop = StopStatefulJobOperator(
            task_id="stop", job_name=job_name, expansion_id=EXPANSION_ID, poll_interval_s=0.5
        )
        write = WriteJobModelOperator(task_id="write", job_name=job_name, expansion_id=EXPANSION_ID)
        ack = JobModelAckSensor(
            task_id="ack",
            job_name=job_name,
            version="{{ ti.xcom_pull(task_ids='write')['version'] }}",
            poke_interval=0.5,
            deferrable=True,
        )
        plan >> expand >> barrier >> stop >> write >> ack
    return dag


def test_expansion_dag_runs_end_to_end_with_dag_test(job, admin, run_dag):
    j = job(2)
    produce_keyed(j.config, j.topic, 100)
    ends = admin.high_watermarks({j.topic: [0, 1]})[j.topic]
    commit_offsets(j.config, j.name, j.topic, ends)  # the job has processed everything
    fake_job = FakeStatefulJob(j.config, j.name)
    fake_job.start()
    try:
        dag_run = run_dag(build_dag(j.name, j.topic))
    finally:
        fake_job.done.set()
        fake_job.join()

    states = task_states(dag_run)
    assert states == dict.fromkeys(["plan", "expand", "barrier", "stop", "write", "ack"], "success")
    assert str(dag_run.state) == "success"
    barrier = task_instance_xcom(dag_run, "barrier")
    assert barrier["barrier_offsets"] == {j.topic: {"0": ends[0], "1": ends[1]}}
    assert task_instance_xcom(dag_run, "write")["version"] == 2
    assert task_instance_xcom(dag_run, "ack")["running"] == ["processor-0"]
    model = j.store.latest_job_model()
    assert model.version == 2 and model.partition_counts() == {j.topic: 4}
    assert model.created_by == f"airflow:expand_{j.name}/{dag_run.run_id}"
    record = j.store.get_expansion(task_instance_xcom(dag_run, "plan")["expansion_id"])
    assert record.status == "job-model-written" and record.steps["stop"].ended_at
