"""The provider's reader plans at most as many read tasks as the application has cores for them
(option ``read_cores``, the shipped job gives Spark's default parallelism): one per partition
while there are enough, the partitions grouped by task when there are no more cores than tasks,
packed by records in between; ``max_read_splits`` stays an explicit override. So a topic grown
2 -> 8 at 2 cores is read by 2 tasks, as before the growth, not 8 (each costs Spark ~0.1 s)."""

from __future__ import annotations

import json

import pytest
from test_spark_source_splits import END, RANGES, START, T, _grown, _reader

from airflow_samza_expand.spark._source_splits import (
    choose_cap,
    cores_for_reads,
    pack,
    plan_choice,
    read_cores_of,
)

pytestmark = pytest.mark.spark


def _task_ranges(partitions: int, tasks: int) -> list:
    return [(f"Partition {p % tasks}", (T, p, 0, 10 * (p + 1))) for p in range(partitions)]


def test_the_cap_is_the_explicit_max_else_the_cores_else_none() -> None:
    assert choose_cap(0, 2) == (2, "2 cores")
    assert choose_cap(3, 2) == (3, "max_read_splits 3")  # the explicit override wins
    assert choose_cap(0, 0) == (0, "cores unknown")


def test_no_more_cores_than_tasks_groups_the_partitions_by_task() -> None:
    # 8 partitions of 2 tasks at 2 cores: each task's partitions in one split (as before growth)
    groups = pack(_task_ranges(8, 2), 2)
    assert [{t for t, _r in g} for g in groups] == [{"Partition 1"}, {"Partition 0"}]
    assert sorted(len(g) for g in groups) == [4, 4]
    # 4 tasks at 3 cores: whole tasks packed by records onto the lightest split
    by_task = pack(_task_ranges(8, 4), 3)
    assert len(by_task) == 3
    for group in by_task:
        tasks = {t for t, _r in group}
        assert all(
            sum(t == u for u, _r in g) == 0 for g in by_task if g is not group for t in tasks
        )
    # more cores than tasks but fewer than partitions: packed by records, ranges whole
    packed = pack(_task_ranges(8, 2), 3)
    assert len(packed) == 3 and sorted(r for g in packed for _t, r in g) == sorted(
        r for _t, r in _task_ranges(8, 2)
    )


def test_the_reader_plans_no_more_read_tasks_than_cores_and_reports_why(tmp_path) -> None:
    report = tmp_path / "plan.json"
    two = _reader(_grown(), read_cores="2", plan_report=str(report)).partitions(START, END)
    assert len(two) == 2  # today's main: 8 read tasks on 2 cores
    assert [set(s.tasks) for s in two] == [{"Partition 1"}, {"Partition 0"}]
    assert sorted(r for s in two for r in s.ranges) == sorted(RANGES)  # every range, whole
    doc = json.loads(report.read_text())
    assert (doc["read_tasks"], doc["choice"]) == (
        2,
        "8 partitions grouped by task into 2 (2 cores)",
    )
    # enough cores: one read task per partition; an explicit max_read_splits wins over cores
    assert len(_reader(_grown(), read_cores="8").partitions(START, END)) == 8
    assert len(_reader(_grown(), read_cores="16").partitions(START, END)) == 8
    assert len(_reader(_grown(), read_cores="2", max_read_splits="3").partitions(START, END)) == 3
    assert plan_choice([(t, r) for t, r in _task_ranges(8, 2)], 0, 8) == (
        "8 partitions, a read task each (8 cores)"
    )


@pytest.mark.parametrize("bad", ["-2", "many"])
def test_bad_read_cores_is_refused_naming_the_option(bad: str) -> None:
    with pytest.raises(ValueError, match=r"read_cores .* whole number >= 0 - give the cores"):
        _reader(_grown(), read_cores=bad)


def test_the_cores_of_a_real_spark_application(spark) -> None:
    """local[2] (the shared session): 2 cores for read tasks; no SparkContext: no cap."""
    assert read_cores_of(spark) == spark.sparkContext.defaultParallelism == 2
    assert read_cores_of(object()) == 0


def test_on_a_cluster_the_cores_asked_for_count_before_the_executors_register() -> None:
    """At a query's start on a standalone cluster Spark's default parallelism may count no
    executor yet (2): an application given 8 cores read an 8-partition topic with 2 tasks
    (benchmarks/read_scaling.py --cores 8). The cores it asks for count."""
    standalone = "spark://127.0.0.1:7077"
    assert cores_for_reads(standalone, 2, {"spark.cores.max": "8"}) == 8
    assert cores_for_reads(standalone, 12, {"spark.cores.max": "8"}) == 12  # registered more
    yarn = {"spark.executor.instances": "3", "spark.executor.cores": "4"}
    assert cores_for_reads("yarn", 2, yarn) == 12
    assert cores_for_reads("k8s://https://api:6443", 2, {"spark.executor.instances": "5"}) == 5
    dynamic = {
        "spark.dynamicAllocation.enabled": "true",
        "spark.executor.instances": "1",
        "spark.dynamicAllocation.maxExecutors": "6",
        "spark.executor.cores": "2",
    }
    assert cores_for_reads("yarn", 2, dynamic) == 12
    # nothing asked, or a value Spark would refuse itself: the executors registered so far
    assert cores_for_reads(standalone, 2, {}) == 2
    assert cores_for_reads(standalone, 2, {"spark.cores.max": "lots"}) == 2
    # a local master's parallelism is exact, and an explicit default parallelism is the user's
    assert cores_for_reads("local[2]", 2, {"spark.cores.max": "8"}) == 2
    assert cores_for_reads(standalone, 3, {"spark.default.parallelism": "3",
                                           "spark.cores.max": "8"}) == 3  # fmt: skip


@pytest.mark.kafka
def test_a_user_jobs_reader_follows_the_cores_unless_it_sets_its_own(
    spark, kafka_bootstrap, unique_topic, tmp_path
) -> None:
    """A user job's ``read_kafka(source="python")`` gets the application's cores as the
    reader's default (local[2]: an 8-partition topic read by 2 tasks, grouped by task), and a
    ``read_cores`` of the job's own wins (8: a read task per partition)."""
    from spark_helpers import create_topic, produce_sequenced

    from airflow_samza_expand.core.model import JobModel
    from airflow_samza_expand.spark import runtime
    from airflow_samza_expand.store import open_store

    topic = unique_topic("cores")
    create_topic(kafka_bootstrap, topic, 8)
    produce_sequenced(kafka_bootstrap, topic, [f"key-{i}" for i in range(40)], 5)
    name = "cores-" + topic
    coordinator = str(tmp_path / "coordinator")
    open_store(coordinator, name).write_job_model(JobModel.initial(name, {topic: 8}))
    job = runtime.attach(spark, [
        "--job-name", name, "--bootstrap-servers", kafka_bootstrap, "--coordinator",
        coordinator, "--checkpoint-dir", str(tmp_path / "unused"), "--output-topic", topic,
        "--processor-id", "user-1", "--no-lease",
    ])  # fmt: skip
    try:
        for run, own in (("default", {}), ("own", {"read_cores": "8"})):
            report = tmp_path / f"plan-{run}.json"
            records = job.read_kafka(source="python", plan_report=str(report), **own)
            query = (
                records.writeStream.format("noop")
                .option("checkpointLocation", str(tmp_path / f"checkpoint-{run}"))
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
            doc = json.loads(report.read_text())
            if run == "default":
                assert doc["read_tasks"] == 2 and doc["choice"].endswith("into 2 (2 cores)"), doc
            else:
                assert doc["read_tasks"] == 8 and doc["choice"].endswith("(8 cores)"), doc
    finally:
        job.close()
