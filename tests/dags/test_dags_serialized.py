"""Golden test: the serialized example DAGs (every DAG in dags/ and the factory's DAGs below,
one per path through the factory) are exactly what tests/dags/serialized/*.json holds - what
Airflow's DAG processor stores (``DagSerialization.to_dict``). A change of the factory or the
settings that alters a serialized DAG fails here: fix the change, not the fixture.

Only what varies by machine is normalised: the DAG file's location, the package's directory
(the shipped job's path) and the processor's DAG folder (the test's temporary Airflow home).
Each task's plain attributes are kept beside Airflow's record: Airflow serializes only the
templated arguments. Regenerate a fixture only for a DAG that is new or deliberately changed:
``.venv/bin/python tests/dags/test_dags_serialized.py <name>``."""

from __future__ import annotations

import dataclasses
import enum
import importlib.util
import json
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "airflow"))
import airflow_env  # noqa: E402,F401,I001 - a temporary AIRFLOW_HOME before airflow is imported

import pytest  # noqa: E402

import airflow_samza_expand  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DAGS_DIR = REPO / "dags"
FIXTURES = Path(__file__).parent / "serialized"
PACKAGE = str(Path(airflow_samza_expand.__file__).resolve().parent)


def _example(name: str) -> Callable[[], Any]:
    def build() -> Any:
        spec = importlib.util.spec_from_file_location(f"golden_{name}", DAGS_DIR / f"{name}.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.dag

    return build


def _args() -> Any:
    from airflow_samza_expand.dags import stream_job_args

    return stream_job_args(job_name="j", bootstrap_servers="b:9092", checkpoint_dir="/c",
                           output_topic="out")  # fmt: skip


def _deploy(job: str) -> Any:
    from airflow.providers.standard.operators.bash import BashOperator

    return BashOperator(task_id=f"deploy_{job.replace('-', '_')}", bash_command="true")


def _factory(**kwargs: Any) -> Callable[[], Any]:
    def build() -> Any:
        from airflow_samza_expand import dags

        made = {k: (getattr(dags, v[0])(**v[1]) if isinstance(v, tuple) else v)
                for k, v in kwargs.items()}  # fmt: skip
        return dags.build_expansion_dag("f", **made)

    return build


def _job(**fields: Any) -> tuple[str, dict[str, Any]]:
    return ("JobSettings", {"name": "j", "application_args": _args(), **fields})


def _task_group() -> Any:
    from airflow.sdk import DAG

    from airflow_samza_expand.dags import JobSettings, expansion_task_group

    with DAG("embedding", schedule=None) as outer:
        expansion_task_group(
            group_id="grow", job=JobSettings(name="j", topics="orders", application_args=_args())
        )
    return outer


def _every_group() -> Any:
    from airflow_samza_expand.dags import (
        BarrierSettings,
        GrowthSettings,
        JobSettings,
        KafkaSettings,
        OwnershipSettings,
        RestartSettings,
        SparkSettings,
        build_expansion_dag,
    )

    return build_expansion_dag(
        "every_group",
        job=JobSettings(name="orders-counter", topics=["orders", "returns"],
                        application_args=_args(), consumer_group="orders-app"),
        kafka=KafkaSettings(kafka_config_id="kafka_prod", coordinator="kafka://coord",
                            check_partitioner=False),
        spark=SparkSettings(conn_id="spark_prod", application="/jobs/job.py",
                            application_on_runtime=True, conf={"spark.x": "1"},
                            env_vars={"A": "1"}, submit_kwargs={"verbose": True},
                            log_dir="/logs"),
        barrier=BarrierSettings(producer_refresh_grace_s=30.0, barrier_timeout_s=60.0,
                                stale_quiet_s=5.0, on_stale_placement="fail"),
        restart=RestartSettings(task=_deploy, hot_standby=True, stop_timeout_s=11.0,
                                standby_warm_timeout_s=12.0, ack_timeout_s=13.0),
        ownership=OwnershipSettings(lease_ttl_s=99.0, other_jobs="ignore",
                                    managed_jobs=["orders-counter"]),
        growth=GrowthSettings(factor=4, max_partitions=64),
        dry_run=True, poll_interval_s=2.0, retries=1, retry_delay=timedelta(seconds=3),
    )  # fmt: skip


BUILDERS: dict[str, Callable[[], Any]] = {
    **{p.stem: _example(p.stem) for p in sorted(DAGS_DIR.glob("*.py"))},
    "factory_available_now": _factory(job=_job(topics=["orders"], run_mode="available-now")),
    "factory_available_now_drain_cold": _factory(
        job=_job(topics="orders", run_mode="available-now", drain_application_args=["--drain"]),
        restart=("RestartSettings", {"restart": "cold"}),
        growth=("GrowthSettings", {"targets": {"orders": 8}}),
    ),
    "factory_multi_topic": _factory(
        job=_job(topics=["a", "b"]), growth=("GrowthSettings", {"targets": {"a": 4, "b": 8}})
    ),
    "factory_task_group": _task_group,
    "factory_every_group": _every_group,
    "factory_several_jobs": _factory(
        job=(
            "JobSettings",
            {
                "jobs": ["a", "b"],
                "topics": "orders",
                "per_job": {
                    "a": {"job": {"application_args": ["--job-name", "a"]}},
                    "b": {
                        "job": {"application_args": ["--job-name", "b"]},
                        "spark": {"conf": {"x": "2"}},
                    },
                },
            },
        ),
        spark=("SparkSettings", {"application": "/jobs/job.py"}),
        kafka=("KafkaSettings", {"kafka_config_id": "kafka_other"}),
    ),
    "factory_all_jobs": _factory(
        job=("JobSettings", {"jobs": "all", "topics": "orders", "application_args": _args()}),
        ownership=("OwnershipSettings", {"lease_ttl_s": 30.0}),
    ),
    "factory_owns_no_launch": _factory(
        job=("JobSettings", {"name": "j", "topics": "orders", "application_args": ["--x"]}),
        restart=("RestartSettings", {"job_down_timeout_s": 42.0}),
    ),
    "factory_templated_form": _factory(
        job=_job(topics="orders"),
        barrier=("BarrierSettings", {"producer_refresh_grace_s": "{{ params.g }}"}),
        params={},
    ),
}


def _plain(value: Any) -> Any:
    """A task attribute as JSON: dataclasses, enums and durations by value; else TypeError."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, timedelta | set | frozenset):
        return str(value) if isinstance(value, timedelta) else sorted(value)
    raise TypeError(type(value).__name__)


def _attributes(task: Any) -> dict[str, Any]:
    """What the factory set on a task that Airflow does not serialize (a non-templated argument
    such as ``stop_timeout_s`` or ``restart``): its public attributes with a plain value."""
    out = {}
    for key, value in sorted(vars(task).items()):
        if key.startswith("_"):
            continue
        try:
            out[key] = json.loads(json.dumps(value, default=_plain, sort_keys=True))
        except (TypeError, ValueError):
            continue  # an object (a callback, the DAG, a hook): its identity, not a setting
    return out


def serialized(dag: Any) -> dict[str, Any]:
    """The DAG as Airflow stores it, and each task's plain attributes (`_attributes`), without
    what varies by machine."""
    from airflow.serialization.serialized_objects import DagSerialization

    data = DagSerialization.to_dict(dag)
    # the test's temporary AIRFLOW_HOME, and where the repository lies
    for volatile in ("_processor_dags_folder", "fileloc", "relative_fileloc"):
        data["dag"].pop(volatile, None)
    both = {"airflow": data, "attributes": {t.task_id: _attributes(t) for t in dag.tasks}}
    text = json.dumps(both, sort_keys=True, indent=1, default=str)
    return json.loads(text.replace(PACKAGE, "<package>").replace(str(REPO), "<repo>"))


def _fixture(name: str) -> Path:
    return FIXTURES / f"{name}.json"


def test_every_builder_has_a_fixture_and_every_fixture_a_builder() -> None:
    assert sorted(p.stem for p in FIXTURES.glob("*.json")) == sorted(BUILDERS)


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_the_serialized_dag_is_unchanged(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in __import__("os").environ if k.startswith("SAMZA_EXPAND_")]:
        if key != "SAMZA_EXPAND_TEST_KAFKA":
            monkeypatch.delenv(key)  # the example DAGs read their settings from the env
    expected = json.loads(_fixture(name).read_text(encoding="utf-8"))
    assert serialized(BUILDERS[name]()) == expected


if __name__ == "__main__":  # write the fixtures named on the command line
    FIXTURES.mkdir(exist_ok=True)
    for arg in sys.argv[1:]:
        out = json.dumps(serialized(BUILDERS[arg]()), sort_keys=True, indent=1)
        _fixture(arg).write_text(out + "\n", encoding="utf-8")
        print(f"wrote {_fixture(arg)}")
