"""The factory's settings are the groups (dags/_groups.py): ``ExpansionSettings`` holds
``job=JobSettings(...)``, ``kafka=``, ``spark=``, ``barrier=``, ``restart=``, ``ownership=``,
``growth=`` and the steps' own few settings - each field and default declared once, the defaults
the protocol's (and the operators' the same); nothing else is a keyword of the factory. DAG
objects only (no run, no broker)."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import airflow_env  # noqa: F401, I001 - sets AIRFLOW_HOME before anything imports airflow
import pytest
from airflow.sdk import DAG

from airflow_samza_expand._protocol.barrier.step import (
    DEFAULT_BARRIER_TIMEOUT_S,
    DEFAULT_PRODUCER_REFRESH_GRACE_S,
)
from airflow_samza_expand._protocol.steps.ack import DEFAULT_ACK_TIMEOUT_S
from airflow_samza_expand._protocol.steps.plan.wait import DEFAULT_JOB_DOWN_TIMEOUT_S
from airflow_samza_expand._protocol.steps.stop import DEFAULT_STOP_TIMEOUT_S
from airflow_samza_expand.airflow.operators import PlanExpansionOperator, StopStatefulJobOperator
from airflow_samza_expand.airflow.sensors import OrderingBarrierSensor
from airflow_samza_expand.dags import (
    BarrierSettings,
    ExpansionSettings,
    GrowthSettings,
    JobSettings,
    KafkaSettings,
    RestartSettings,
    build_expansion_dag,
    expansion_task_group,
    stream_job_args,
)
from airflow_samza_expand.dags._groups import GROUPS

ARGS = stream_job_args(job_name="orders-counter", checkpoint_dir="/c", output_topic="out")
JOB = JobSettings(name="j", topics="t", application_args=ARGS)


def _default(cls: type, name: str) -> Any:
    return next(f.default for f in dataclasses.fields(cls) if f.name == name)


def test_the_settings_are_the_groups_and_at_most_twelve_fields() -> None:
    fields = {f.name: f for f in dataclasses.fields(ExpansionSettings)}
    assert len(fields) <= 12, sorted(fields)
    for name, cls in GROUPS.items():
        assert fields[name].default_factory is cls, name  # type: ignore[misc]
    own = set(fields) - set(GROUPS)
    assert own == {"dry_run", "poll_interval_s", "retries", "retry_delay",
                   "write_job_model_operator"}  # fmt: skip
    names = [f.name for cls in GROUPS.values() for f in dataclasses.fields(cls)]
    assert len(names) == len(set(names)), "a field declared in two groups"
    assert not set(names) & own


def test_defaults_are_the_protocols_and_the_operators_take_the_same() -> None:
    assert _default(BarrierSettings, "producer_refresh_grace_s") == DEFAULT_PRODUCER_REFRESH_GRACE_S
    assert _default(BarrierSettings, "barrier_timeout_s") == DEFAULT_BARRIER_TIMEOUT_S
    assert _default(RestartSettings, "stop_timeout_s") == DEFAULT_STOP_TIMEOUT_S
    assert _default(RestartSettings, "ack_timeout_s") == DEFAULT_ACK_TIMEOUT_S
    assert _default(RestartSettings, "job_down_timeout_s") == DEFAULT_JOB_DOWN_TIMEOUT_S
    for operator, group, names in (
        (OrderingBarrierSensor, BarrierSettings, ("producer_refresh_grace_s",
                                                 "barrier_timeout_s")),
        (StopStatefulJobOperator, RestartSettings, ("stop_timeout_s",)),
        (PlanExpansionOperator, RestartSettings, ("job_down_timeout_s",)),
    ):  # fmt: skip
        params = inspect.signature(operator.__init__).parameters
        for name in names:
            assert params[name].default == _default(group, name), (operator.__name__, name)


def test_the_factory_takes_only_the_settings_fields_naming_an_unknown_one() -> None:
    with pytest.raises(
        TypeError, match=r"\['barrier_timeout_s'\] - give barrier=BarrierSettings\("
    ):
        build_expansion_dag("d", job=JOB, barrier_timeout_s=5)
    with pytest.raises(TypeError, match=r"\['application_args', 'job_name', 'topics'\]"):
        build_expansion_dag("d", job_name="j", topics="t", application_args=ARGS)
    with pytest.raises(TypeError, match=r"pass job=JobSettings\(\.\.\.\)"):
        build_expansion_dag("d", job={"name": "j"})
    with pytest.raises(TypeError, match="unexpected keyword argument 'timeout_s'"):
        BarrierSettings(timeout_s=5)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'config_id'"):
        KafkaSettings(config_id="k")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'handover'"):
        RestartSettings(handover="warm")  # type: ignore[call-arg]
    with pytest.raises(dataclasses.FrozenInstanceError):
        JobSettings(name="j").name = "k"  # type: ignore[misc]


def test_settings_and_fields_together_the_fields_replace_whole_groups() -> None:
    base = ExpansionSettings(job=JOB, barrier=BarrierSettings(barrier_timeout_s=5),
                             restart=RestartSettings(stop_timeout_s=7))  # fmt: skip
    dag = build_expansion_dag("mixed", base, barrier=BarrierSettings(stale_quiet_s=1.0),
                              growth=GrowthSettings(factor=4))  # fmt: skip
    barrier = dag.task_dict["barrier"]
    assert (barrier.stale_quiet_s, dag.task_dict["stop_job"].stop_timeout_s) == (1.0, 7)
    assert dag.params["barrier_timeout_s"] == DEFAULT_BARRIER_TIMEOUT_S  # the group's default
    assert dag.params["factor"] == 4
    with DAG("outer", schedule=None) as outer:
        expansion_task_group(base, group_id="grow")
    assert outer.task_dict["grow.barrier"].barrier_timeout_s == 5
    assert outer.task_dict["grow.stop_job"].stop_timeout_s == 7


def test_per_job_fields_are_group_fields_and_an_unknown_one_is_named() -> None:
    per_job = {"a": {"job": {"application_args": ARGS}},
               "b": {"job": {"application_args": ARGS}, "spark": {"conf": {"x": "2"}}}}  # fmt: skip
    s = ExpansionSettings(job=JobSettings(jobs=["a", "b"], topics="t", per_job=per_job))
    b = s.for_job("b")
    assert (b.job.name, b.spark.conf, b.ownership.co_jobs) == ("b", {"x": "2"}, ("a",))
    assert b.ownership.other_jobs == "include" and b.job.jobs is None
    bad = dataclasses.replace(s, job=dataclasses.replace(s.job, per_job={"a": {"spark_conf": {}}}))
    with pytest.raises(TypeError, match=r"per_job\['a'\]: 'spark_conf' is not a settings group"):
        bad.for_job("a")
    bad = dataclasses.replace(
        s, job=dataclasses.replace(s.job, per_job={"a": {"spark": {"cnf": 1}}})
    )
    with pytest.raises(TypeError, match=r"per_job\['a'\]: unknown setting\(s\) \['cnf'\] of Spark"):
        bad.for_job("a")


def test_modes_are_enums_taken_as_strings_with_a_clear_error() -> None:
    from airflow_samza_expand.dags import (
        OnStalePlacement,
        OtherJobs,
        OwnershipSettings,
        Restart,
        RunMode,
    )

    s = ExpansionSettings(
        job=JobSettings(name="j", topics="t", application_args=ARGS, run_mode="Available_Now"),
        restart=RestartSettings(restart="COLD"),
        barrier=BarrierSettings(on_stale_placement="fail"),
        ownership=OwnershipSettings(other_jobs="ignore"),
    )
    assert s.job.run_mode is RunMode.AVAILABLE_NOW and s.restart.restart is Restart.COLD
    assert s.barrier.on_stale_placement is OnStalePlacement.FAIL
    assert s.ownership.other_jobs is OtherJobs.IGNORE
    templated = BarrierSettings(on_stale_placement="{{ params.on_stale }}")
    kept = dataclasses.replace(s, barrier=templated).barrier.on_stale_placement
    assert kept == "{{ params.on_stale }}"  # rendered by Airflow, checked by the operator
    dag = build_expansion_dag("modes", s)
    assert dag.task_dict["plan"].other_jobs == "ignore"
    assert dag.task_dict["report"].run_mode == "available-now"
    for group, bad, choices in (
        (OwnershipSettings(other_jobs="skip"), "other_jobs='skip'", "'refuse', 'include'"),
        (RestartSettings(restart="hot"), "restart='hot'", "'auto', 'in-place'"),
    ):
        with pytest.raises(ValueError, match=f"{bad} is not known - use one of {choices}"):
            build_expansion_dag("bad", job=JOB, **{type(group).__name__[:-8].lower(): group})
