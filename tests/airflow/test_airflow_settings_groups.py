"""The factory's settings in groups (dags/_groups.py): ``job=JobSettings(...)``, ``kafka=``,
``spark=``, ``barrier=``, ``restart=``, ``ownership=`` build the same DAG as the flat keywords,
which still work for one release with one DeprecationWarning per keyword naming its
replacement; flat and grouped together is refused, building nothing. DAG objects only (no run,
no broker)."""

from __future__ import annotations

import dataclasses
import warnings
from datetime import timedelta
from typing import Any

import airflow_env  # noqa: F401, I001 - sets AIRFLOW_HOME before anything imports airflow
import pytest
from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG
from airflow.serialization.serialized_objects import DagSerialization

from airflow_samza_expand.dags import (
    BarrierSettings,
    ExpansionSettings,
    JobSettings,
    KafkaSettings,
    OwnershipSettings,
    RestartSettings,
    SparkSettings,
    build_expansion_dag,
    expansion_task_group,
    stream_job_args,
)
from airflow_samza_expand.dags._groups import FLAT_NAMES, GROUPS

ARGS = stream_job_args(job_name="orders-counter", checkpoint_dir="/c", output_topic="out")
# the settings about the DAG itself: no group (co_jobs is set by the factory)
TOP_LEVEL = {
    "factor", "targets", "follow_live_counts", "policy", "max_partitions", "dry_run",
    "poll_interval_s", "retries", "retry_delay", "write_job_model_operator", "co_jobs",
}  # fmt: skip


def _deploy(job: str) -> BashOperator:
    return BashOperator(task_id=f"deploy_{job.replace('-', '_')}", bash_command="true")


# (flat keywords, the same settings in groups): every group field set to a value of its own
CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "continuous, every group": (
        dict(
            job_name="orders-counter", topics=["orders", "returns"], application_args=ARGS,
            consumer_group="orders-app", run_mode="continuous",
            kafka_config_id="kafka_prod", coordinator="kafka://coord", check_partitioner=False,
            spark_conn_id="spark_prod", application="/jobs/job.py", application_on_runtime=True,
            spark_conf={"spark.x": "1"}, spark_env_vars={"A": "1"},
            spark_submit_kwargs={"verbose": True}, log_dir="/logs",
            producer_refresh_grace_s=30.0, barrier_timeout_s=60.0, stale_quiet_s=5.0,
            on_stale_placement="fail",
            handover="auto", restart_task=_deploy, hot_standby=True, stop_timeout_s=11.0,
            standby_warm_timeout_s=12.0, ack_timeout_s=13.0,
            lease_ttl_s=99.0, other_jobs="ignore", managed_jobs=["orders-counter"],
            factor=4, dry_run=True, poll_interval_s=2.0, retries=1,
            retry_delay=timedelta(seconds=3), max_partitions=64,
        ),
        dict(
            job=JobSettings(
                name="orders-counter", topics=["orders", "returns"], application_args=ARGS,
                consumer_group="orders-app", run_mode="continuous",
            ),
            kafka=KafkaSettings(
                config_id="kafka_prod", coordinator="kafka://coord", check_partitioner=False
            ),
            spark=SparkSettings(
                conn_id="spark_prod", application="/jobs/job.py", application_on_runtime=True,
                conf={"spark.x": "1"}, env_vars={"A": "1"}, submit_kwargs={"verbose": True},
                log_dir="/logs",
            ),
            barrier=BarrierSettings(
                producer_refresh_grace_s=30.0, timeout_s=60.0, stale_quiet_s=5.0,
                on_stale_placement="fail",
            ),
            restart=RestartSettings(
                handover="auto", task=_deploy, hot_standby=True, stop_timeout_s=11.0,
                standby_warm_timeout_s=12.0, ack_timeout_s=13.0,
            ),
            ownership=OwnershipSettings(
                lease_ttl_s=99.0, other_jobs="ignore", managed_jobs=["orders-counter"]
            ),
            factor=4, dry_run=True, poll_interval_s=2.0, retries=1,
            retry_delay=timedelta(seconds=3), max_partitions=64,
        ),
    ),
    "available-now, drain": (
        dict(job_name="j", topics="orders", application_args=ARGS, run_mode="available-now",
             drain_application_args=[*ARGS, "--drain"], handover="cold", targets={"orders": 8}),
        dict(job=JobSettings(name="j", topics="orders", application_args=ARGS,
                             run_mode="available-now", drain_application_args=[*ARGS, "--drain"]),
             restart=RestartSettings(handover="cold"), targets={"orders": 8}),
    ),
    "several jobs": (
        dict(jobs=["a", "b"], topics="orders", per_job={"a": {"application_args": ARGS},
             "b": {"application_args": ARGS, "spark_conf": {"x": "2"}}}, kafka_conn_id="old"),
        dict(job=JobSettings(jobs=["a", "b"], topics="orders", per_job={
             "a": {"application_args": ARGS},
             "b": {"application_args": ARGS, "spark_conf": {"x": "2"}}}),
             kafka=KafkaSettings(config_id="old")),
    ),
    "every job reading the topics": (
        dict(jobs="all", topics="orders", application_args=ARGS, lease_ttl_s=30.0),
        dict(job=JobSettings(jobs="all", topics="orders", application_args=ARGS),
             ownership=OwnershipSettings(lease_ttl_s=30.0)),
    ),
}  # fmt: skip


def _serialized(dag: DAG) -> dict[str, Any]:
    out = DagSerialization.to_dict(dag)["dag"]
    for volatile in ("fileloc", "relative_fileloc"):
        out.pop(volatile, None)
    return out


def _flat(build: Any, *args: Any, **kwargs: Any) -> tuple[Any, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        built = build(*args, **kwargs)
    return built, [w for w in caught if issubclass(w.category, DeprecationWarning)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_grouped_form_builds_the_same_dag_as_the_flat_one(case: str) -> None:
    flat, grouped = CASES[case]
    old, _ = _flat(build_expansion_dag, "same", **flat)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the grouped form warns nothing
        new = build_expansion_dag("same", **grouped)
    assert sorted(new.task_ids) == sorted(old.task_ids)
    for task in old.tasks:
        twin = new.task_dict[task.task_id]
        assert type(twin) is type(task), task.task_id
        for name in task.template_fields:
            assert getattr(twin, name) == getattr(task, name), f"{task.task_id}.{name}"
    assert _serialized(new) == _serialized(old)  # every operator attribute Airflow keeps


def test_the_task_group_takes_the_same_groups() -> None:
    _, grouped = CASES["continuous, every group"]
    dag = build_expansion_dag("whole", **grouped)
    with DAG("outer", schedule=None) as outer:
        expansion_task_group(group_id="grow", **grouped)
    assert {f"grow.{t}" for t in dag.task_ids} == set(outer.task_ids)
    assert outer.task_dict["grow.barrier"].barrier_timeout_s == 60.0
    assert outer.task_dict["grow.stop_job"].stop_timeout_s == 11.0
    assert "grow.plan" in outer.task_dict["grow.barrier"].expansion_id


def test_each_flat_keyword_of_a_group_warns_once_naming_its_replacement() -> None:
    flat, _ = CASES["continuous, every group"]
    _, caught = _flat(build_expansion_dag, "flat", **flat)
    messages = [str(w.message) for w in caught]
    grouped_keys = [k for k in flat if k in FLAT_NAMES]
    assert len(messages) == len(grouped_keys) == len(set(messages))  # one each, none for factor
    assert (
        "build_expansion_dag(barrier_timeout_s=...) is deprecated: pass "
        "barrier=BarrierSettings(timeout_s=...)"
    ) in messages
    for key in grouped_keys:
        group, attr = FLAT_NAMES[key]
        expected = f"({key}=...) is deprecated: pass {group}={GROUPS[group].__name__}({attr}=...)"
        assert sum(expected in m for m in messages) == 1, key
    assert {w.filename for w in caught} == {__file__}  # the warning points at the caller
    with DAG("outer", schedule=None):
        _, caught = _flat(expansion_task_group, job_name="j", topics="t", application_args=ARGS)
    assert [str(w.message) for w in caught] == [
        "expansion_task_group(job_name=...) is deprecated: pass job=JobSettings(name=...)",
        "expansion_task_group(topics=...) is deprecated: pass job=JobSettings(topics=...)",
        "expansion_task_group(application_args=...) is deprecated: pass "
        "job=JobSettings(application_args=...)",
    ]


def test_the_old_kafka_conn_id_spelling_still_works_and_says_what_replaces_it() -> None:
    dag, caught = _flat(build_expansion_dag, "old", job=JobSettings(name="j", topics="t",
                        application_args=ARGS), kafka_conn_id="kafka_old")  # fmt: skip
    assert [str(w.message) for w in caught] == [
        "build_expansion_dag(kafka_conn_id=...) is deprecated: pass kafka=KafkaSettings("
        "config_id=...)"
    ]
    assert {t.kafka_config_id for t in dag.tasks if hasattr(t, "kafka_config_id")} == {
        "kafka_old"
    }


@pytest.mark.parametrize(
    ("flat", "group", "named"),
    [
        ({"barrier_timeout_s": 5}, {"barrier": BarrierSettings(timeout_s=5)}, "barrier_timeout_s"),
        ({"job_name": "j"}, {}, "job_name"),  # the job group is given below
        ({"kafka_conn_id": "k"}, {"kafka": KafkaSettings()}, "kafka_conn_id"),
        ({"restart_task": _deploy}, {"restart": RestartSettings()}, "restart_task"),
    ],
)
def test_a_setting_given_flat_and_grouped_is_refused_and_nothing_is_built(
    flat: dict[str, Any], group: dict[str, Any], named: str
) -> None:
    job = JobSettings(name="j", topics="t", application_args=ARGS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match=rf"{named}=\.\.\. and \w+=\w+Settings\(\.\.\.\)"):
            build_expansion_dag("both", job=job, **group, **flat)
        with DAG("outer", schedule=None) as outer, pytest.raises(ValueError, match=named):
            expansion_task_group(job=job, **group, **flat)
    assert outer.task_ids == []  # nothing built
    assert [w for w in caught if issubclass(w.category, DeprecationWarning)] == []


def test_unknown_fields_and_wrong_types_are_type_errors() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'timeout'"):
        BarrierSettings(timeout=5)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'job_name'"):
        JobSettings(job_name="j")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"pass job=JobSettings\(\.\.\.\)"):
        build_expansion_dag("d", job={"name": "j"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unknown expansion setting"):
        build_expansion_dag("d", job=JobSettings(name="j", topics="t", application_args=ARGS),
                            barrier_timeout=5)  # fmt: skip
    with pytest.raises(dataclasses.FrozenInstanceError):
        JobSettings(name="j").name = "k"  # type: ignore[misc]


def test_every_setting_is_in_one_group_or_about_the_dag_and_the_defaults_agree() -> None:
    fields = {f.name: f for f in dataclasses.fields(ExpansionSettings)}
    grouped = set(FLAT_NAMES) - {"kafka_conn_id"}
    assert not grouped & TOP_LEVEL
    assert grouped | TOP_LEVEL | {"kafka_conn_id"} == set(fields)
    for key in grouped:
        group, attr = FLAT_NAMES[key]
        default = next(f.default for f in dataclasses.fields(GROUPS[group]) if f.name == attr)
        assert default == fields[key].default, f"{group}.{attr} vs {key}"


def test_settings_and_groups_together_the_groups_replace_their_fields() -> None:
    base = ExpansionSettings(job_name="j", topics="t", application_args=ARGS,
                             barrier_timeout_s=5, stop_timeout_s=7)  # fmt: skip
    dag = build_expansion_dag("mixed", base, barrier=BarrierSettings(stale_quiet_s=1.0))
    barrier = dag.task_dict["barrier"]
    assert (barrier.stale_quiet_s, dag.task_dict["stop_job"].stop_timeout_s) == (1.0, 7)
    assert dag.params["barrier_timeout_s"] == 3600.0  # the group's own default
