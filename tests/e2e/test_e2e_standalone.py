"""The expansion end to end on a real Spark standalone cluster (a master and one worker started
from the installed pyspark on 127.0.0.1): the jobs are submitted to the master in client mode,
so the Python data source and the stateful count run in an executor's Python workers under the
worker JVM. Same scenario and checks as test_e2e_expansion.py (continuous mode), one expansion
(2 -> 4): its subject is the cluster - the job and its restart on vN+1 submitted to the master;
the chain's second round is the same code, run twice by the local e2e tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_e2e_expansion import CHAIN_OK, _run_expansions

from airflow_samza_expand._testing.spark_standalone import SparkStandalone

# dev_ci: its subject is the Spark cluster, not the Kafka - CI runs it in the rest lane
pytestmark = [
    pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.dev_ci,
    pytest.mark.timeout(1500),
]  # fmt: skip


@pytest.fixture(scope="module")
def spark_standalone() -> Iterator[SparkStandalone]:
    """Master + worker for this module; stopped by pid at the end."""
    with SparkStandalone() as cluster:
        yield cluster


def test_expansion_on_a_spark_standalone_cluster(scenario, spark_standalone, monkeypatch):
    from airflow_samza_expand._demo.jobs import spark_connection_env

    master = spark_standalone.master_url
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", spark_connection_env(master))
    s = scenario(run_mode="continuous", master=master)
    outcomes = _run_expansions(s, 1)
    for outcome in outcomes:
        assert outcome.state == "success", outcome.tasks
        assert {t for t, st in outcome.tasks.items() if st == "success"} >= CHAIN_OK
    result = s.finish(expected_versions=[1, 2])
    print(f"[e2e] standalone {master}: {result.describe()}")
    assert result.ok, result.describe()
    assert result.records_produced > 0 and result.records_counted == result.records_produced
    assert set(range(2, 4)) <= set(result.partitions_consumed)
    assert result.job_model_versions == [1, 2]
    # The runs (v1, and the restart on v2) were applications of this master.
    status = spark_standalone.status()
    apps = [a["name"] for a in status["activeapps"] + status["completedapps"]]
    ours = [name for name in apps if name == f"samza-expand-{s.job_name}"]
    assert len(ours) >= 2, f"the master saw applications {apps}"
