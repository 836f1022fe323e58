"""`samza-expand init-job` on the development broker: v1 of an existing topic, idempotent,
refusals that write nothing (exit 2), the optional output topic."""

from __future__ import annotations

import pytest

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand.cli import main
from airflow_samza_expand.store import coordinator_topic
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

pytestmark = pytest.mark.kafka


@pytest.fixture
def admin(kafka_bootstrap):
    with KafkaAdmin(client_config(kafka_bootstrap), timeout_s=15) as admin:
        yield admin


def init(capsys, bootstrap: str, *argv: str) -> tuple[int, str, str]:
    code = main(["init-job", "--bootstrap-servers", bootstrap, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_writes_v1_of_an_existing_topic_once(kafka_bootstrap, admin, unique_topic, capsys):
    topic, job, out_topic = unique_topic("orders"), unique_topic("job"), unique_topic("counts")
    admin.ensure_topic(topic, 2)
    argv = ["--job-name", job, "--topic", topic, "--create-output-topic", out_topic]
    code, out, err = init(capsys, kafka_bootstrap, *argv, "--output-partitions", "3")
    assert (code, err) == (0, "")
    assert f"wrote job model v1 of {job} in {coordinator_topic(job)}" in out
    assert f"Partition 0: {topic}[0]; Partition 1: {topic}[1]" in out
    assert f"output topic {out_topic}: created" in out
    assert admin.partition_counts([out_topic]) == {out_topic: 3}
    with KafkaCoordinatorStore(client_config(kafka_bootstrap), job) as store:
        model = store.latest_job_model()
    assert model is not None and model.version == 1 and model.partition_counts() == {topic: 2}
    assert model.grouper == "GroupByPartitionFixedTasks"

    code, out, err = init(capsys, kafka_bootstrap, *argv)  # idempotent
    assert (code, err) == (0, "")
    assert "already there, same content (nothing written)" in out
    assert f"output topic {out_topic}: exists, kept" in out
    with KafkaCoordinatorStore(client_config(kafka_bootstrap), job) as store:
        assert [m.version for m in store.job_model_history()] == [1]


def test_refuses_a_topic_that_does_not_exist(kafka_bootstrap, admin, unique_topic, capsys):
    missing, job, out_topic = unique_topic("missing"), unique_topic("job"), unique_topic("out")
    argv = ["--job-name", job, "--topic", missing, "--create-output-topic", out_topic]
    code, out, err = init(capsys, kafka_bootstrap, *argv)
    assert (code, out) == (2, "")
    assert f"topic {missing!r} does not exist" in err
    assert "create it with the partition count you want" in err and "nothing written" in err
    names = admin.topic_names()
    assert coordinator_topic(job) not in names and out_topic not in names and missing not in names


def test_refuses_a_differing_v1(kafka_bootstrap, admin, unique_topic, capsys):
    a, b, job = unique_topic("a"), unique_topic("b"), unique_topic("job")
    admin.ensure_topic(a, 2)
    admin.ensure_topic(b, 4)
    assert init(capsys, kafka_bootstrap, "--job-name", job, "--topic", a)[0] == 0
    code, out, err = init(capsys, kafka_bootstrap, "--job-name", job, "--topic", a, "--topic", b)
    assert (code, out) == (2, "")
    assert f"job {job!r} already has a job model v1" in err and "that differs" in err
    assert "nothing written" in err and "another job name for a new job" in err
    with KafkaCoordinatorStore(client_config(kafka_bootstrap), job) as store:
        (model,) = store.job_model_history()
    assert model.partition_counts() == {a: 2}


def test_from_group_copies_an_existing_jobs_position_into_the_jobs_group(
    kafka_bootstrap, admin, unique_topic, capsys
):
    """Moving a job onto the runtime: the position of the group it used is copied into the
    job's own group (where its first run starts); a rerun is idempotent."""
    topic, job, legacy = unique_topic("orders"), unique_topic("job"), unique_topic("legacy")
    admin.ensure_topic(topic, 2)
    admin.commit_group_offsets(legacy, {topic: {0: 7, 1: 3}})
    argv = ["--job-name", job, "--topic", topic, "--from-group", legacy]
    code, out, err = init(capsys, kafka_bootstrap, *argv)
    assert (code, err) == (0, "")
    assert f"position of group {legacy} copied into group {job}: {topic}[0] 7, {topic}[1] 3" in out
    assert admin.group_offsets(job, {topic: [0, 1]}) == {topic: {0: 7, 1: 3}}
    code, out, err = init(capsys, kafka_bootstrap, *argv)  # a rerun: the same position is held
    assert (code, err) == (0, "") and "already there, same content" in out


def test_from_group_refusals_write_nothing(kafka_bootstrap, admin, unique_topic, capsys):
    topic, job, legacy = unique_topic("orders"), unique_topic("job"), unique_topic("legacy")
    admin.ensure_topic(topic, 2)
    # a group that committed nothing on the topic (a mistyped name): nothing written
    code, out, err = init(capsys, kafka_bootstrap, "--job-name", job, "--topic", topic,
                          "--from-group", legacy + "-typo")  # fmt: skip
    assert (code, out) == (2, "")
    assert "has committed no offset" in err and "nothing written" in err
    assert coordinator_topic(job) not in admin.topic_names()
    # the job's group already holds another position (the job ran): refused, nothing written
    admin.commit_group_offsets(legacy, {topic: {0: 7, 1: 3}})
    admin.commit_group_offsets(job, {topic: {0: 1, 1: 1}})
    code, out, err = init(capsys, kafka_bootstrap, "--job-name", job, "--topic", topic,
                          "--from-group", legacy)  # fmt: skip
    assert (code, out) == (2, "")
    assert f"consumer group {job!r} already holds a position" in err
    assert coordinator_topic(job) not in admin.topic_names()
    assert admin.group_offsets(job, {topic: [0, 1]}) == {topic: {0: 1, 1: 1}}


def _member_of(bootstrap: str, group: str, topic: str):
    """A real consumer of `group`, subscribed to `topic`, once the group assigned it partitions."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "client.id": "old-job", "enable.auto.commit": "false"})  # fmt: skip
    consumer.subscribe([topic])
    for _ in range(300):  # joins within a few polls; bounded
        consumer.poll(0.1)
        if consumer.assignment():
            return consumer
    consumer.close()
    raise AssertionError(f"the consumer never joined group {group!r}")


def test_from_group_refuses_a_group_with_live_members(kafka_bootstrap, admin, unique_topic, capsys):
    """The old job still runs (a consumer subscribed in its group): refused, nothing written;
    once it stopped, the position is copied."""
    topic, job, legacy = unique_topic("orders"), unique_topic("job"), unique_topic("legacy")
    admin.ensure_topic(topic, 2)
    admin.commit_group_offsets(legacy, {topic: {0: 7, 1: 3}})
    consumer = _member_of(kafka_bootstrap, legacy, topic)
    argv = ["--job-name", job, "--topic", topic, "--from-group", legacy]
    try:
        code, out, err = init(capsys, kafka_bootstrap, *argv)
    finally:
        consumer.close()
    assert (code, out) == (2, "")
    assert f"consumer group {legacy!r} has 1 live member(s) (old-job@" in err
    assert "the old job still runs" in err and "nothing written" in err
    assert f"--describe --group {legacy} --members" in err
    assert coordinator_topic(job) not in admin.topic_names()
    assert admin.group_offsets(job, {topic: [0, 1]}) == {topic: {0: None, 1: None}}
    code, out, err = init(capsys, kafka_bootstrap, *argv)  # stopped: the position is copied
    assert (code, err) == (0, "")
    assert admin.group_offsets(job, {topic: [0, 1]}) == {topic: {0: 7, 1: 3}}


def test_from_group_refuses_the_group_of_a_runtime_job_whose_processors_run(
    kafka_bootstrap, admin, unique_topic, capsys, tmp_path
):
    """A runtime job commits with assign() (no group members): its live processors, in its
    coordinator store, name it; a stopped one does not block."""
    from airflow_samza_expand.store import open_store

    topic, job, old = unique_topic("orders"), unique_topic("job"), unique_topic("old")
    admin.ensure_topic(topic, 2)
    admin.commit_group_offsets(old, {topic: {0: 4, 1: 5}})
    coordinator = str(tmp_path / "coordinator")
    with open_store(coordinator, old) as store:
        store.heartbeat("old-1", 1, "running", role="active", ttl_s=60)
    argv = ["--job-name", job, "--topic", topic, "--from-group", old, "--coordinator", coordinator]
    code, out, err = init(capsys, kafka_bootstrap, *argv)
    assert (code, out) == (2, "")
    assert f"consumer group {old!r} is the group of runtime job {old!r}" in err
    assert "old-1 (running active v1" in err and "nothing written" in err
    assert not (tmp_path / "coordinator" / job).exists()
    assert admin.group_offsets(job, {topic: [0, 1]}) == {topic: {0: None, 1: None}}
    with open_store(coordinator, old) as store:
        store.heartbeat("old-1", 1, "stopped", role="active", ttl_s=60)
    assert init(capsys, kafka_bootstrap, *argv)[0] == 0
    assert admin.group_offsets(job, {topic: [0, 1]}) == {topic: {0: 4, 1: 5}}


def test_from_group_and_from_checkpoint_exclude_each_other(
    kafka_bootstrap, admin, unique_topic, capsys, tmp_path
):
    topic, job = unique_topic("orders"), unique_topic("job")
    admin.ensure_topic(topic, 2)
    code, out, err = init(capsys, kafka_bootstrap, "--job-name", job, "--topic", topic,
                          "--from-group", "g", "--from-checkpoint", str(tmp_path))  # fmt: skip
    assert (code, out) == (2, "")
    assert "--from-group and --from-checkpoint exclude each other" in err
    assert coordinator_topic(job) not in admin.topic_names()


def test_from_checkpoint_refuses_what_is_no_checkpoint(
    kafka_bootstrap, admin, unique_topic, capsys, tmp_path
):
    """A folder without Spark's offset log, an fsspec URL of a filesystem not installed: exit 2
    naming it and the fix, nothing written (real checkpoints: tests/spark)."""
    topic, job = unique_topic("orders"), unique_topic("job")
    admin.ensure_topic(topic, 2)
    for where, expected in [
        (str(tmp_path), "is not a Spark streaming checkpoint (empty or missing"),
        ("nosuchfs://bucket/ck", "install the fsspec filesystem of nosuchfs://"),
    ]:
        code, out, err = init(capsys, kafka_bootstrap, "--job-name", job, "--topic", topic,
                              "--from-checkpoint", where)  # fmt: skip
        assert (code, out) == (2, ""), err
        assert expected in err and "nothing written" in err
    assert coordinator_topic(job) not in admin.topic_names()
    assert admin.group_offsets(job, {topic: [0, 1]}) == {topic: {0: None, 1: None}}
