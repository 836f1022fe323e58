"""A representative subset of the fault matrix (`benchmarks/fault_matrix.py`, which runs all its
cases) in CI, through the same case functions: the REAL shipped job (Spark local[2]) under live
keyed traffic, the expansion DAG run with ``dag.test()`` in a process of its own, SIGKILLed once
a step began, then cleared:

* the default restart (in place) with one expansion killed midway in each of its steps in
  turn - plan, expand, the barrier's grace and drain, write, ack, report - each kill's clearing
  killed in the next step, until a clearing completes it (``kill/in-place/each-step``);
* in-app (the example user job on Spark's own Kafka source, supervised as a cluster manager
  runs it: `_testing.supervisor`) with one expansion killed midway in each step in turn, the
  same way (``kill/in-app/each-step``): one Spark application for the whole case, its query
  restarted on v2 in its driver, nothing launched by Airflow, the driver never restarted, at
  most one processor processing at any moment;

Each: the expansion completed once, every produced record counted exactly once, in per-key
order; each kill landed inside its step (the record at the kill: begun, not ended). The other
cases run in the script (and, with the fake job, in test_airflow_faults.py /
test_airflow_broker_restart.py; the processor cases in tests/spark). A broker restarted under
the running job between expansions (``broker/in-place/between``) runs only there: its parts
hold in CI without Spark's cost - the driver's coordinator-store reads riding out a restarted
Apache Kafka (tests/spark/test_driver_outage.py) and the reader's batched watermark reads
(tests/spark/test_spark_source_restart.py). The warm handover's steps
killed with the real job (``kill/warm/<step>``) run only there; in CI the fake job's run killed
in each of them (test_airflow_faults.py) and the real job's warm expansion interrupted and
rerun with exact counts (tests/e2e/test_e2e_reliability.py) hold their parts.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

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


def context(kafka: Any, airflow_home: str, tmp_path: Path, monkeypatch) -> fault_matrix.Context:
    """The matrix's context on ``kafka`` and the tests' Airflow home (the cases' DAG runs
    inherit its environment: connections, Spark on PATH)."""
    from airflow_samza_expand._demo.jobs import spark_connection_env, spark_env

    conn = airflow_env.kafka_connection_env(kafka.bootstrap)
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DEFAULT", conn)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", spark_connection_env("local[2]"))
    monkeypatch.setenv("PATH", spark_env()["PATH"])
    assert os.environ["AIRFLOW_HOME"] == airflow_home
    from e2e_settings import E2E_TRIGGER

    return fault_matrix.Context(
        kafka, tmp_path, lambda line: print(line, flush=True), trigger=E2E_TRIGGER
    )


def run(ctx: fault_matrix.Context, name: str) -> None:
    (case,) = [c for c in fault_matrix.all_cases() if c.name == name]
    outcome = case.run(ctx, case)
    assert outcome.ok, outcome
    assert outcome.mid_step is not False, f"a kill landed outside its step: {outcome.notes}"


def test_one_expansion_killed_midway_in_each_in_place_step_completes_once(
    kafka_bootstrap, airflow_home, tmp_path, monkeypatch
) -> None:
    kafka = SimpleNamespace(bootstrap=kafka_bootstrap)
    run(context(kafka, airflow_home, tmp_path, monkeypatch), "kill/in-place/each-step")


def test_one_in_app_expansion_killed_midway_in_each_step_completes_once(
    kafka_bootstrap, airflow_home, tmp_path, monkeypatch
) -> None:
    kafka = SimpleNamespace(bootstrap=kafka_bootstrap)
    run(context(kafka, airflow_home, tmp_path, monkeypatch), "kill/in-app/each-step")
