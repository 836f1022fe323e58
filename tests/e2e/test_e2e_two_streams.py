"""End to end: a job that joins two co-partitioned streams by key (``orders`` and ``payments``,
SEP-5's join example) under live traffic on both, on Apache Kafka. The streams share their keys
(every order key also gets payments, at half the rate: each payment has its order); the
expansion DAG grows only ``orders``, twice in a row (2 -> 4 -> 8), with the factory's default
restart. Each run ends green only with its outcome on the cluster: the record ``completed``,
``orders`` at its target, the job on the new model; the barrier, the order check and the report
consider only the stream that grows, ``payments`` keeps its 2 partitions and is consumed to its
end. The verifier checks each key's join: its orders, its payments and the payments that met
their order are exactly what was produced, and none of them ever went back across the growths
(the join's state never reset), with per-stream order and exact counts.

* ``shipped-in-place``: the shipped job with the join as its keyed processor
  (`_testing.keyed.OrderPaymentJoin`), switched in place: an order and a payment of one key
  meet only if the job model keeps both streams' partitions of the key in one task - every
  key's outputs come from one task from start to end. The same process and its one processor
  run before, between and after; the reader plans a read task per core (2) on v1, v2 and v3
  (what test_e2e_in_place.py held for one stream, merged here: one run of the slow scenario);
* ``user-join-in-app``: ``examples/join_job.py`` (Spark's own Kafka source, state in
  ``applyInPandasWithState`` keyed by the record key, ``job.run(start)``), its query restarted
  in-app on each new job model, exactly (docs/own-job.md, "Which restart your job gets"): the
  plan's choice is the first restart every live processor advertises, one processor and one
  Spark application from start to end, nothing launched by Airflow, no stop record - a fall
  back to a warm handover fails it (the in-app case of test_e2e_user_job.py, merged here).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_e2e_in_place import read_tasks_by_version
from test_e2e_user_job import (
    CHAIN_OK,
    _nothing_launched,
    _one_application_restarting_its_query,
    expected_mode,
)

from airflow_samza_expand._demo.verify import read_output_history
from airflow_samza_expand._protocol.records import expansion_id_for
from airflow_samza_expand._testing.keyed import JOIN_PATH
from airflow_samza_expand.core._liveness import statuses
from airflow_samza_expand.core._record import ExpansionStatus

pytestmark = [
    pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.timeout(1500),
]  # fmt: skip

JOIN_JOB = str(Path(__file__).resolve().parents[2] / "airflow_samza_expand/examples/join_job.py")
JOBS = {
    # the shipped job, the join as its processor: "auto" switches it in place
    "shipped-in-place": ({"application_args": ("--processor", JOIN_PATH)}, "in-place"),
    # a user's join on Spark's own Kafka source, handing job.run its start: "auto" is in-app
    "user-join-in-app": ({"application": JOIN_JOB}, "in-app"),
}


@pytest.mark.parametrize("job", sorted(JOBS))
def test_a_join_of_two_streams_sharing_keys_holds_across_two_growths(scenario, job) -> None:
    options, restart = JOBS[job]
    s = scenario(second_stream=True, keys=20, rate=40.0, restart="auto", **options)
    payments = s.other_topic
    s.start_producer()
    s.start_job()
    first = dict(s.job.handle)
    pid = int(first["pid"])
    for before, after in ((2, 4), (4, 8)):
        live = [p for p in statuses(s.store.processors()).values() if p.state == "running"]
        vn = s.store.latest_job_model().version
        assert [p.job_model_version for p in live] == [vn], live  # one processor, on vN
        outcome = s.expand()
        print(f"[e2e] two streams ({job}) {before}->{after}: {outcome.state} {outcome.tasks}")
        assert outcome.state == "success", outcome.tasks
        assert outcome.counts == (before, after)
        assert outcome.summary["order"]["order"] == "proven", outcome.summary["order"]["line"]
        assert {t for t, st in outcome.tasks.items() if st == "success"} >= CHAIN_OK
        assert outcome.summary["restart"]["mode"] == restart, outcome.summary["restart"]
        assert "pid" not in (outcome.summary["submit"] or {}), outcome.summary["submit"]
        assert not outcome.standby_took_over, outcome
        assert int(s.job.handle["pid"]) == pid, s.job.handle  # the same driver: none launched
        os.kill(pid, 0)  # ... and it still runs
        record = s.store.get_expansion(
            expansion_id_for(s.job_name, {s.topic: before}, {s.topic: after})
        )
        assert record is not None and record.status == ExpansionStatus.COMPLETED, record
        assert set(record.barrier) == {s.topic}  # the stream that stays has no barrier
        assert record.grown_counts() == {s.topic: (before, after)}
        assert s.admin.partition_counts([s.topic, payments]) == {s.topic: after, payments: 2}
        assert s.store.latest_job_model().version == record.target_version
        choice = (record.results.get("plan") or {}).get("restart") or {}
        assert choice.get("requested") == "auto", choice  # the factory's default
        assert choice.get("mode") == expected_mode([p.capabilities for p in live]) == restart
    _nothing_launched(s, first)  # one processor, on v3, running; no spark-submit, no stop
    if restart == "in-app":
        _one_application_restarting_its_query(s, first)
    else:  # a read task per core (local[2]) on every model, the grown partitions by task
        assert read_tasks_by_version(first["log_path"]) == {1: 2, 2: 2, 3: 2}
    result = s.finish(expected_versions=[1, 2, 3])
    print(f"[e2e] two streams ({job}): {result.describe()}")
    assert result.ok, result.describe()
    assert not result.join_mismatches and not result.count_resets and not result.order_violations
    assert result.records_counted == result.records_produced > 0
    orders, paid = s.producer.snapshot(), s.other_producer.snapshot()
    assert set(orders) == set(paid) and all(paid.values()), paid  # the keys are shared
    assert all(0 < paid[k] <= orders[k] for k in orders), (orders, paid)  # each has its order
    assert set(range(8)) <= set(result.partitions_consumed)
    assert result.other_partitions_consumed == {payments: [0, 1]}
    v3 = s.models[-1]
    assert v3.partition_counts() == {s.topic: 8, payments: 2}
    assert v3.tasks() == ["Partition 0", "Partition 1"]
    if job == "shipped-in-place":  # the join lives in the key's task: one task per key
        history = read_output_history(s.config, s.output_topic)
        split = {k: sorted({o["task"] for o in outs}) for k, outs in history.items()}
        assert all(len(tasks) == 1 for tasks in split.values()), split
