"""Processors of one job: one active, standbys, failover, zombie, handover race.

Each processor is its own process (own JVM, own process group) on the same checkpoint and
coordinator store, as two launches of the job would be. CI runs them on Apache Kafka
(`apache_ci`): the failover waits for the broker to expire the dead member's session, and the
zombie's fencing rests on the broker's group protocol.
"""

from __future__ import annotations

import dataclasses
import signal

import pytest
from processor_helpers import JobSetup, wait_for
from spark_helpers import produce_sequenced, read_latest_outputs

from airflow_samza_expand.spark._lifecycle import EXIT_LEASE_LOST

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow, pytest.mark.apache_ci]

KEYS = [f"key-{i}" for i in range(20)]


def role_of(job: JobSetup, pid: str) -> tuple:
    p = job.processor(pid)
    return p.get("state"), p.get("role"), p.get("job_model_version")


def assert_exact(job: JobSetup, per_key: int) -> None:
    outputs = read_latest_outputs(job.bootstrap, job.output)
    assert {k: o["count"] for k, o in outputs.items()} == {k: per_key for k in KEYS}
    assert all(o["violations"] == 0 for o in outputs.values())


@pytest.fixture
def job(kafka_bootstrap, unique_topic, tmp_path):
    setup = JobSetup(kafka_bootstrap, unique_topic, tmp_path)
    started = []
    setup.started = started
    yield setup
    for proc in started:
        proc.stop()


def start(job: JobSetup, pid: str, *extra: str):
    proc = job.start(pid, *extra)
    job.started.append(proc)
    return proc


def active_and_standby(job: JobSetup, a, b):
    def roles():
        ra, rb = role_of(job, "a"), role_of(job, "b")
        if ra[:2] == ("running", "active") and rb[:2] == ("standby", "standby"):
            return a, b
        if rb[:2] == ("running", "active") and ra[:2] == ("standby", "standby"):
            return b, a
        return None

    return wait_for(roles, "one active and one standby processor", procs=(a, b))


def test_two_instances_one_processes_and_a_killed_active_fails_over(job):
    seqs = produce_sequenced(job.bootstrap, job.topic, KEYS, 20)  # 400 records
    a, b = start(job, "a"), start(job, "b", "--standby")
    active, standby = active_and_standby(job, a, b)
    wait_for(lambda: job.committed_total() == 400, "400 records committed", procs=(a, b))
    assert role_of(job, standby.pid_name)[:2] == ("standby", "standby")
    assert "is a standby" in standby.log_text()
    assert "committed group" not in standby.log_text()  # the standby read and committed nothing
    assert_exact(job, 20)

    active.signal_group(signal.SIGKILL)
    active.expect_running = False
    seqs = produce_sequenced(job.bootstrap, job.topic, KEYS, 20, first_seq=seqs)
    wait_for(
        lambda: role_of(job, standby.pid_name)[:2] == ("running", "active"),
        "the standby to take over after the lease expired",
        procs=(standby,),
    )
    wait_for(lambda: job.committed_total() == 800, "800 records committed", procs=(standby,))
    assert_exact(job, 40)


def test_zombie_commits_nothing_more_and_stops(job):
    produce_sequenced(job.bootstrap, job.topic, KEYS, 20)
    a, b = start(job, "a"), start(job, "b", "--standby")
    active, standby = active_and_standby(job, a, b)
    wait_for(lambda: job.committed_total() == 400, "400 records committed", procs=(a, b))
    active.signal_group(signal.SIGSTOP)  # the whole process group: driver, JVM, workers
    active.expect_running = False
    commits_before = active.log_text().count("committed group")
    wait_for(
        lambda: role_of(job, standby.pid_name)[:2] == ("running", "active"),
        "the standby to take the expired lease",
        procs=(standby,),
    )
    produce_sequenced(job.bootstrap, job.topic, KEYS, 10, first_seq={k: 20 for k in KEYS})
    wait_for(lambda: job.committed_total() == 600, "600 records committed", procs=(standby,))
    active.signal_group(signal.SIGCONT)
    assert active.wait() == EXIT_LEASE_LOST, active.tail()
    assert active.log_text().count("committed group") == commits_before
    assert "lost the active lease" in active.log_text()
    produce_sequenced(job.bootstrap, job.topic, KEYS, 10, first_seq={k: 30 for k in KEYS})
    wait_for(lambda: job.committed_total() == 800, "800 records committed", procs=(standby,))
    assert_exact(job, 40)


def test_handover_standby_for_next_version_never_processes_the_older_one(job):
    produce_sequenced(job.bootstrap, job.topic, KEYS, 10)
    v1 = job.store.latest_job_model()
    a = start(job, "a")
    wait_for(lambda: job.committed_total() == 200, "v1 to commit 200 records", procs=(a,))
    b = start(job, "b", "--standby", "--job-model-version", "2")
    seen_roles: list[tuple] = []

    def warm() -> bool:  # b heartbeats starting (role standby) while warming up, then standby
        role = role_of(job, "b")
        if role[0] and (not seen_roles or seen_roles[-1] != role):
            seen_roles.append(role)
        return role == ("standby", "standby", 2)

    wait_for(warm, "b standby", procs=(a, b))
    assert seen_roles[0] == ("starting", "standby", 2), seen_roles  # the stop step waits on it
    # warm: the stateful plan ran once, and the Kafka data source is registered and loaded
    assert "warm-up of the Kafka data source took" in b.log_text()
    assert "not warmed up" not in b.log_text() and "committed group" not in b.log_text()
    # The race: v1 lets go of the lease before v2 is written.
    job.store.request_stop(v1.version, "test: handover")
    assert a.wait() == 0, a.tail()
    wait_for(lambda: "waiting for v2" in b.log_text(), "b to hold the lease for v2", procs=(b,))
    produce_sequenced(job.bootstrap, job.topic, KEYS, 10, first_seq={k: 10 for k in KEYS})
    seen = [job.processor("b").get("heartbeat_at")]

    def two_more_heartbeats() -> bool:
        beat = job.processor("b").get("heartbeat_at")
        if beat != seen[-1]:
            seen.append(beat)
        return len(seen) >= 3

    wait_for(two_more_heartbeats, "two more standby heartbeats of b", procs=(b,))
    assert job.committed_total() == 200  # nobody processed while v2 was missing
    assert role_of(job, "b") == ("standby", "standby", 2)
    job.store.write_job_model(dataclasses.replace(v1, version=2))
    wait_for(lambda: job.committed_total() == 400, "v2 to commit 400 records", procs=(b,))
    assert role_of(job, "b") == ("running", "active", 2)
    assert "runs job model v1" not in b.log_text()
    assert_exact(job, 20)
    # a stop of v2 ends the new processor cleanly
    job.store.request_stop(2, "test: done")
    assert b.wait() == 0, b.tail()
    assert role_of(job, "b")[0] == "stopped"
