"""The expansion's Kafka steps on a secured Apache Kafka, each actor holding exactly its
least-privilege ACLs (kafka.acls), under live traffic:

demo (creates the topics, produces keyed records) -> spark-job (reads its partitions, commits
the group, writes outputs, heartbeats) -> airflow: plan (partitioner sample, record, lease),
expand 2 -> 4, barrier (snapshot + the job's committed offsets), stop, write job model v2,
ack (processors), watcher (partition count). A restarted job on v2 then reads all 4 partitions.
"""

from __future__ import annotations

import logging
import time

from secured_flow import JobKafkaActions

from airflow_samza_expand._demo.producer import KeyedProducer
from airflow_samza_expand._kafka.acls import resolve
from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.conformance import check_conformance
from airflow_samza_expand._protocol.barrier.reads import barrier_status, snapshot_barrier
from airflow_samza_expand.core._clock import now_iso
from airflow_samza_expand.core._plan import plan_expansion
from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore


def _wait(what: str, check, timeout_s: float = 60.0):
    deadline = time.monotonic() + timeout_s
    while not (value := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return value


def test_expansion_steps_with_exactly_the_least_privilege_acls(principal, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    suffix = str(time.monotonic_ns())[-8:]
    job, topic, output = f"lp-{suffix}", f"orders-{suffix}", f"counts-{suffix}"
    names = {"job": job, "inputs": [topic], "output": output}
    demo = principal(resolve("demo", **names), name="demo")
    airflow = principal(resolve("airflow", **names), name="airflow")
    spark = principal(resolve("spark-job", **names), name="job")

    with KafkaAdmin(demo) as admin:  # demo: CREATE
        admin.ensure_topic(topic, 2, replication_factor=1)
        admin.ensure_topic(output, 1, replication_factor=1)
    producer = KeyedProducer(demo, topic, keys=20, rate=200.0, refresh_ms=500)
    producer.start()
    store = KafkaCoordinatorStore(airflow, job)  # airflow: CREATE + WRITE coordinator
    admin = KafkaAdmin(airflow)
    try:
        store.write_job_model(JobModel.initial(job, {topic: 2}))
        first = JobKafkaActions(spark, job, output)
        first.start()
        _wait("the job's first commit", lambda: first.consumed > 0)

        # plan
        assert admin.partition_counts([topic]) == {topic: 2}
        check_conformance(airflow, topic, partition_count=2).raise_if_mismatch()
        model = store.latest_job_model()
        plan = plan_expansion(model, {topic: 2}, {topic: 4})
        lease = store.acquire_lease("expansion", "airflow:test/run", 60.0)
        record = store.put_expansion(
            ExpansionRecord(
                expansion_id=f"{job}-x1", job_name=job, base_version=1, target_version=2,
                plan=plan.to_dict(), status=ExpansionStatus.PLANNED, owner=lease.holder,
                created_at=now_iso(), updated_at=now_iso(),
            ),
            expected_revision=0, fence=lease,
        )  # fmt: skip
        # expand
        admin.create_partitions(topic, 4)
        _wait("4 partitions", lambda: admin.partition_counts([topic]) == {topic: 4})
        record = store.put_expansion(
            record.advance(ExpansionStatus.EXPANDED), expected_revision=record.revision,
            fence=lease,
        )  # fmt: skip
        # barrier: the running job (old partitions only) passes the snapshot
        barrier = snapshot_barrier(admin, {topic: 2})
        record = store.put_expansion(
            record.advance(ExpansionStatus.BARRIER_SNAPSHOT, barrier=barrier),
            expected_revision=record.revision, fence=lease,
        )  # fmt: skip
        _wait("the barrier", lambda: barrier_status(admin, job, barrier).holds)
        # stop
        store.request_stop(1, "expansion")
        assert first.stopped.wait(60), "the v1 job did not stop"
        assert first.errors == []
        # write v2; restart; ack
        store.write_job_model(plan.new_job_model)
        store.clear_stop()
        second = JobKafkaActions(spark, job, output)
        second.start()
        _wait(
            "v2 heartbeat",
            lambda: any(p.get("job_model_version") == 2 for p in store.processors().values()),
        )
        _wait("v2 reading the new partitions", lambda: second.consumed > 0)
        # v2 has committed on the new partitions (not only on the old ones) before it stops
        _wait("v2 commits on the new partitions", lambda: all(
            admin.group_offsets(job, {topic: [2, 3]})[topic][p] is not None for p in (2, 3)
        ))  # fmt: skip
        # watcher
        assert admin.partition_counts([topic]) == {topic: 4}
        store.request_stop(2, "test over")
        assert second.stopped.wait(60) and second.errors == []
    finally:
        producer.stop()
        admin.close()
        store.close()
    assert producer.errors == []
    committed = KafkaAdmin(airflow).group_offsets(job, {topic: range(4)})[topic]
    assert all(committed[p] is not None for p in (2, 3)), committed
    for secret in (demo, airflow, spark):
        assert secret["sasl.password"] not in caplog.text
