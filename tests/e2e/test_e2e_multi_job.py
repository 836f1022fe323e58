"""End to end with two real stateful jobs on one topic, under live traffic: job a runs the
shipped `SequenceCounter`, job b `_testing.keyed.SequenceDigest` (other state, another order
check); each has its own consumer group, coordinator topic, checkpoint and output topic; both run
continuously on local[2]. One run of the multi-job DAG (factory ``jobs=[a, b]``, dag.test())
grows the topic 2 -> 4 once and switches each job in place to its own v2. Then each job's
outputs count every produced record exactly, in order (b: digest of seq 0..n-1 per key), with no
count going back, and each job consumed the new partitions."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "airflow"))
import airflow_env  # noqa: E402,I001 - the e2e conftest already set AIRFLOW_HOME

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.timeout(1200)]


@pytest.fixture
def multi(e2e_airflow, kafka_bootstrap, tmp_path):
    from airflow_samza_expand._demo.multi import MultiJobScenario
    from airflow_samza_expand._demo.scenario import ScenarioConfig
    from airflow_samza_expand._testing import keyed
    from airflow_samza_expand.spark._processor import DEFAULT_PROCESSOR

    m = MultiJobScenario(
        ScenarioConfig(
            bootstrap=kafka_bootstrap, work_dir=tmp_path, keys=24, rate=40.0, restart="auto"
        ),
        [DEFAULT_PROCESSOR, keyed.PATH],
        run_dag=airflow_env.run_dag_test,
        task_states=airflow_env.task_states,
        xcom=airflow_env.task_instance_xcom,
        log=lambda line: print(f"[e2e] {line}", flush=True),
    )
    yield m
    m.close()


def test_two_jobs_one_topic_one_run_grows_it_once_and_both_keep_exact_counts_and_order(multi):
    from airflow_samza_expand._demo.verify import read_output_history
    from airflow_samza_expand._testing.keyed import expected_digest

    m = multi
    m.setup()
    m.start_producer()
    m.start_jobs()
    outcome = m.expand()
    print(f"[e2e] multi-job run: {outcome.state} {outcome.tasks}")
    assert outcome.state == "success", outcome.tasks
    names = [s.name for s in m.sides]
    assert {j: row["outcome"] for j, row in outcome.jobs.items()} == dict.fromkeys(
        names, "completed"
    )
    assert m.admin.partition_counts([m.topic]) == {m.topic: 4}
    applied = []
    for side in m.sides:
        assert outcome.plans[side.name]["readers"]["managed_jobs"] == {m.topic: sorted(names)}
        # both jobs run on the provider's reader: "auto" switched each in place (no restart;
        # the restart strategies have their own e2e tests)
        assert outcome.plans[side.name]["restart"]["mode"] == "in-place", outcome.plans
        (record,) = side.store.expansions()
        assert record.status == "completed"
        applied.append(record.results["expand"][m.topic]["applied"])
    assert sorted(applied) == [False, True]  # grown once; the other job found it grown

    results = m.finish(expected_versions=[1, 2])
    for side in m.sides:
        result = results[side.name]
        print(f"[e2e] {side.name} ({side.processor}): {result.describe()}")
        assert result.ok, result.describe()
        assert result.records_produced > 0
        assert result.records_counted == result.records_produced
        assert not result.count_resets and not result.order_violations
        assert {2, 3} <= set(result.partitions_consumed)
        v2 = side.store.latest_job_model()
        assert v2.partition_counts() == {m.topic: 4}
        assert v2.tasks() == ["Partition 0", "Partition 1"]
    assert m.producer is not None
    produced = m.producer.snapshot()
    digests = read_output_history(m.config, m.sides[1].output_topic)
    wrong = {
        key: digests[key][-1]["digest"]
        for key, n in produced.items()
        if n and digests[key][-1]["digest"] != expected_digest(n)
    }
    assert not wrong, f"keys whose records were not seen once each in order: {wrong}"
