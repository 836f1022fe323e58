"""The fault matrix's DAG settings per case (`benchmarks/fault_matrix.py`): each case's overrides
build the expansion DAG's settings - a case that cannot build its DAG fails before its fault,
as ``triggerer/barrier`` did once the settings became groups (its grace was given as a field
of the whole settings: "unexpected keyword argument 'producer_refresh_grace_s'")."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import fault_matrix  # noqa: E402


@pytest.mark.parametrize("step", ["barrier", "ack"])
def test_a_triggerer_case_builds_its_dag_settings(tmp_path, step) -> None:
    from airflow_samza_expand._demo.scenario_config import ScenarioConfig, dag_settings

    cfg = ScenarioConfig(bootstrap="127.0.0.1:9092", work_dir=tmp_path, grace_s=3.0, restart="auto")
    job = {"name": "fm-job", "topics": ["fm-job-orders"], "run_mode": "continuous",
           "application_args": ["--job-name", "fm-job"]}  # fmt: skip
    overrides = fault_matrix._merged(fault_matrix.BOUNDED, fault_matrix.triggerer_overrides(step))
    settings = dag_settings(cfg, job, None, overrides)
    assert settings.barrier.barrier_timeout_s == 180.0  # the matrix's bound, kept
    assert settings.barrier.producer_refresh_grace_s == (20.0 if step == "barrier" else 3.0)
    assert settings.retries == 1
    if step == "ack":  # the ack waits for the job's start: the submit step does not
        assert settings.spark.submit_kwargs == {"startup_check_s": 0.0}
    from airflow_samza_expand.dags import build_expansion_dag

    dag = build_expansion_dag(f"fault_triggerer_{step}", settings)
    if step == "ack":
        assert dag.get_task("submit").startup_check_s == 0.0
