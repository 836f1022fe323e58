"""End to end: a job that reads two co-partitioned streams (``orders`` and ``payments``, as
SEP-5's join example) under live keyed traffic on both, on Apache Kafka; the expansion DAG grows
only ``orders``, twice in a row (2 -> 4 -> 8). Each run ends green only with its outcome on the
cluster: the record ``completed``, ``orders`` at its target, the job on the new model; the
second run grows again (a record left at ``planned`` made it a green no-op). The barrier, the
order check and the report consider only the stream that grows; the stream that stays is read
on as before: exact counts and per-key order on both, ``payments`` keeps its 2 partitions and is
consumed to its end. Once with the shipped job (switched in place), once with a user's job on
Spark's own Kafka source restarted warm."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_samza_expand._protocol.records import expansion_id_for
from airflow_samza_expand.core._record import ExpansionStatus

pytestmark = [
    pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.timeout(1500),
]  # fmt: skip

USER_JOB = str(Path(__file__).resolve().parents[2] / "airflow_samza_expand/examples/user_job.py")
JOBS = {
    # the shipped job on the provider's reader: "auto" switches it in place
    "shipped-in-place": ({"handover": "auto"}, "in-place"),
    # a user's job on Spark's own Kafka source, restarted warm
    "user-kafka-warm": (
        {"application": USER_JOB, "application_args": ("--source", "kafka"), "handover": "warm"},
        "warm",
    ),
}


@pytest.mark.parametrize("job", sorted(JOBS))
def test_growing_one_of_two_streams_twice_completes_each_record(scenario, job) -> None:
    options, restart = JOBS[job]
    s = scenario(run_mode="continuous", second_stream=True, keys=20, rate=40.0, **options)
    payments = s.other_topic
    s.start_producer()
    s.start_job()
    for before, after in ((2, 4), (4, 8)):
        outcome = s.expand()
        print(f"[e2e] two streams ({job}) {before}->{after}: {outcome.state} {outcome.tasks}")
        assert outcome.state == "success", outcome.tasks
        assert outcome.counts == (before, after)
        assert outcome.summary["order"]["order"] == "proven", outcome.summary["order"]["line"]
        assert outcome.summary["restart"]["mode"] == restart, outcome.summary["restart"]
        record = s.store.get_expansion(
            expansion_id_for(s.job_name, {s.topic: before}, {s.topic: after})
        )
        assert record is not None and record.status == ExpansionStatus.COMPLETED, record
        assert set(record.barrier) == {s.topic}  # the stream that stays has no barrier
        assert record.grown_counts() == {s.topic: (before, after)}
        assert s.admin.partition_counts([s.topic, payments]) == {s.topic: after, payments: 2}
        assert s.store.latest_job_model().version == record.target_version
    result = s.finish(expected_versions=[1, 2, 3])
    print(f"[e2e] two streams ({job}): {result.describe()}")
    assert result.ok, result.describe()
    assert result.records_counted == result.records_produced > 0
    assert not result.count_resets and not result.order_violations
    assert any(k.startswith("pay-") for k in s.other_producer.snapshot())
    assert set(range(8)) <= set(result.partitions_consumed)
    assert result.other_partitions_consumed == {payments: [0, 1]}
    v3 = s.models[-1]
    assert v3.partition_counts() == {s.topic: 8, payments: 2}
    assert v3.tasks() == ["Partition 0", "Partition 1"]
