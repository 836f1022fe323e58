"""The CI case of the cluster fault matrix (`benchmarks/fault_matrix.py --cluster
--smoke`, whose other cases run in the script): the REAL shipped job under live keyed traffic
on a three-node Apache Kafka cluster (replication 3, min.insync.replicas 2), the expansion DAG
run with ``dag.test()`` in a process of its own, the coordinator topic's leader SIGKILLed in the
middle of the write of job model v2."""

from __future__ import annotations

import pytest
from test_airflow_fault_matrix import context, fault_matrix

pytestmark = [
    pytest.mark.slow,
    pytest.mark.spark,
    pytest.mark.kafka,
    pytest.mark.apache_ci,
    pytest.mark.timeout(600),
]


def test_the_coordinator_leader_killed_during_the_write_on_a_cluster_completes_once(
    airflow_home, tmp_path, monkeypatch
) -> None:
    """The coordinator topic's leader SIGKILLed while the write of job model v2 is held midway:
    the write goes on against the new leader; the expansion completes once, exact and in order,
    and the kill landed inside the step."""
    import _fault_matrix_cluster

    kafka = _fault_matrix_cluster.start_cluster(tmp_path)
    try:
        (case,) = [
            c
            for c in _fault_matrix_cluster.cluster_cases()
            if c.name == fault_matrix.CLUSTER_SMOKE_CASE
        ]
        outcome = case.run(context(kafka, airflow_home, tmp_path, monkeypatch), case)
        assert outcome.ok, outcome
    finally:
        kafka.close()
