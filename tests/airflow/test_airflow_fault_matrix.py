"""A representative subset of the fault matrix (`benchmarks/fault_matrix.py`, which runs all its
cases) in CI, through the same case functions: the REAL shipped job (Spark local[2]) under live
keyed traffic, the expansion DAG run with ``dag.test()`` in a process of its own, SIGKILLed once
a step began, then cleared:

* the warm handover killed once its stop step began (vN asked to stop, the vN+1 standby
  waiting): the cleared run finds the stop and the standby it started and completes once;
* the in-place switch killed once the write of vN+1 began (the running job switches while no
  task runs): the cleared run completes once, the job never restarted.

Each: the expansion completed once, every produced record counted exactly once, in per-key
order. The broker-restart, lease-takeover and processor cases run in the script (and, with the
fake job, in test_airflow_faults.py / test_airflow_broker_restart.py / tests/spark).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace

import airflow_env
import pytest

pytest.importorskip("pyspark")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import fault_matrix  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.spark,
    pytest.mark.kafka,
    pytest.mark.apache_ci,
    pytest.mark.timeout(600),
]
CI_CASES = ("kill/warm/stop", "kill/in-place/write")


@pytest.fixture
def matrix(kafka_bootstrap: str, airflow_home: str, tmp_path: Path, monkeypatch):
    """The matrix's context on the run's Kafka and the tests' Airflow home (the cases' DAG
    runs inherit its environment: connections, Spark on PATH)."""
    from airflow_samza_expand.demo.jobs import spark_connection_env, spark_env

    conn = airflow_env.kafka_connection_env(kafka_bootstrap)
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DEFAULT", conn)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", spark_connection_env("local[2]"))
    monkeypatch.setenv("PATH", spark_env()["PATH"])
    assert os.environ["AIRFLOW_HOME"] == airflow_home
    lines: list[str] = []

    def log(line: str) -> None:
        lines.append(line)
        print(line, flush=True)

    return fault_matrix.Context(SimpleNamespace(bootstrap=kafka_bootstrap), tmp_path, log)


@pytest.mark.parametrize("name", CI_CASES)
def test_fault_matrix_case(matrix, name: str) -> None:
    (case,) = [c for c in fault_matrix.all_cases() if c.name == name]
    outcome = case.run(matrix, case)
    assert outcome.ok, outcome
