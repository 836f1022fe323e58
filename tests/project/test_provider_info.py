"""The provider entry point resolves through importlib.metadata and lists importable classes."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
from pathlib import Path

import pytest

ENTRY_POINT = "airflow_samza_expand.get_provider_info:get_provider_info"


def provider_info() -> dict:
    (entry,) = [
        ep
        for ep in importlib.metadata.entry_points(group="apache_airflow_provider")
        if ep.value == ENTRY_POINT
    ]
    return entry.load()()


def listed_modules(info: dict) -> list[str]:
    return [
        module
        for section in ("hooks", "operators", "sensors", "triggers")
        for group in info[section]
        for module in group["python-modules"]
    ]


def test_entry_point_resolves_to_this_package():
    info = provider_info()
    assert info["package-name"] == "airflow-samza-expand"
    assert listed_modules(info), "provider info lists no modules"


def test_provider_info_matches_airflows_schema():
    jsonschema = pytest.importorskip("jsonschema")
    import airflow

    schema_path = Path(airflow.__file__).parent / "provider_info.schema.json"
    jsonschema.validate(provider_info(), json.loads(schema_path.read_text()))


def test_every_listed_module_and_class_imports():
    from airflow_samza_expand.get_provider_info import CLASSES

    info = provider_info()
    modules = listed_modules(info)
    for module in modules:
        importlib.import_module(module)
    for path in CLASSES:
        module_name, _, name = path.rpartition(".")
        assert module_name in modules, f"{path} lives in a module the provider info omits"
        assert isinstance(getattr(importlib.import_module(module_name), name), type), path
    for conn_type in info["connection-types"]:
        module_name, _, name = conn_type["hook-class-name"].rpartition(".")
        getattr(importlib.import_module(module_name), name)


def test_every_exported_trigger_operator_and_sensor_is_listed():
    """A component a module exports (its ``__all__``) but the provider info omits is invisible to
    Airflow's providers manager (the triggerer cannot name it, docs list it nowhere)."""
    from airflow.sdk import BaseOperator
    from airflow.triggers.base import BaseTrigger

    from airflow_samza_expand.get_provider_info import CLASSES

    missing = []
    for module_name in (
        "airflow_samza_expand.airflow.triggers",
        "airflow_samza_expand.airflow.operators",
        "airflow_samza_expand.airflow.sensors",
    ):
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if not (isinstance(obj, type) and issubclass(obj, (BaseTrigger, BaseOperator))):
                continue
            if obj.__module__.startswith(module_name) and f"{module_name}.{name}" not in CLASSES:
                missing.append(f"{module_name}.{name}")
    assert not missing, f"exported but not in get_provider_info.CLASSES: {missing}"


def test_the_classes_are_airflow_components():
    from airflow.sdk import BaseHook, BaseOperator, BaseSensorOperator
    from airflow.triggers.base import BaseEventTrigger, BaseTrigger

    from airflow_samza_expand.get_provider_info import CLASSES

    bases = {"hooks": BaseHook, "operators": BaseOperator, "sensors": BaseSensorOperator}
    for path in CLASSES:
        module_name, _, name = path.rpartition(".")
        cls = getattr(importlib.import_module(module_name), name)
        kind = module_name.split(".")[2]
        expected = bases.get(kind, BaseTrigger)
        assert issubclass(cls, expected), f"{path} is not a {expected.__name__}"
    from airflow_samza_expand.airflow.triggers import PartitionCountChangeTrigger

    assert issubclass(PartitionCountChangeTrigger, BaseEventTrigger)


# -- provider conventions ----------------------------------------------------------------------


def test_config_section_declares_every_option_the_ui_reads_with_its_default():
    """`[samza_expand]` is declared in the provider info (Airflow lists it in `airflow config
    list` and fills its defaults); every option airflow/_ui/settings.py reads is there, with the
    default the settings use."""
    import re

    from airflow_samza_expand.airflow._ui import settings

    info = provider_info()
    options = info["config"]["samza_expand"]["options"]
    read = set(re.findall(r'get\("(\w+)"', Path(settings.__file__).read_text()))
    assert read and set(options) == read
    default = settings.UiSettings()
    expected = {
        "ui_jobs": ",".join(default.jobs),
        "ui_kafka_config_id": default.kafka_config_id,
        "ui_coordinator": default.coordinator,
        "ui_discover": str(default.discover),
        "ui_processor_ttl_s": str(default.processor_ttl_s),
        "ui_timeout_s": str(default.timeout_s),
        "ui_log_dirs": None,  # machine-dependent (the temp dir): the settings' fallback
    }
    assert {name: o["default"] for name, o in options.items()} == expected
    for option in options.values():
        assert option["description"] and option["type"] in {"string", "boolean", "float"}


def test_extra_links_are_operator_links():
    from airflow.sdk import BaseOperatorLink

    links = provider_info()["extra-links"]
    assert links == ["airflow_samza_expand.airflow._ui.links.ExpansionJobLink"]
    for path in links:
        module_name, _, name = path.rpartition(".")
        assert issubclass(getattr(importlib.import_module(module_name), name), BaseOperatorLink)


@pytest.mark.parametrize("setting", ["True", "False"])
def test_sensors_deferrable_default_follows_operators_default_deferrable(tmp_path, setting):
    """As Airflow's providers do: ``deferrable`` defaults to ``[operators] default_deferrable``
    (read when the module is imported, hence a process of its own); False pokes, True defers."""
    import os
    import subprocess
    import sys

    code = (
        "from airflow_samza_expand.airflow.sensors import (JobModelAckSensor, "
        "OrderingBarrierSensor, PartitionCountSensor)\n"
        "print([OrderingBarrierSensor(task_id='b', job_name='j', expansion_id='e').deferrable,"
        " JobModelAckSensor(task_id='a', job_name='j').deferrable,"
        " PartitionCountSensor(task_id='p', topic='t').deferrable])\n"
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__")},
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": setting,
    }
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == str([setting == "True"] * 3)


def test_openlineage_facets_name_a_schema_url_in_the_repository():
    """A facet's ``_schemaURL`` is an https URL of its JSON Schema, docs/openlineage/<Facet>.json
    of this repository (with the facet's definition), whose properties are the facet's fields."""
    pytest.importorskip("openlineage.client")
    from urllib.parse import urlsplit

    import attr

    from airflow_samza_expand.airflow._lineage import facet_classes

    docs = Path(__file__).resolve().parents[2] / "docs" / "openlineage"
    for cls in facet_classes().values():
        url = urlsplit(cls._get_schema())
        assert url.scheme == "https" and url.netloc, url.geturl()
        assert url.path.endswith(f"/docs/openlineage/{cls.__name__}.json")
        assert url.fragment == f"/$defs/{cls.__name__}"
        schema = json.loads((docs / f"{cls.__name__}.json").read_text())
        own = schema["$defs"][cls.__name__]["allOf"][1]["properties"]
        fields = {f.name for f in attr.fields(cls)} - {"_producer", "_schemaURL", "_deleted"}
        assert set(own) == fields


def _factory_dag(**kwargs):
    from airflow_samza_expand.dags import JobSettings, build_expansion_dag, stream_job_args

    args = stream_job_args(job_name="orders-counter", checkpoint_dir="/tmp/c", output_topic="o")
    job = JobSettings(name="orders-counter", topics="orders", application_args=args)
    return build_expansion_dag("form_test", job=job, **kwargs)


def test_the_factory_gives_a_trigger_form_whose_defaults_are_the_dags_values():
    from airflow_samza_expand.dags import BarrierSettings, GrowthSettings

    dag = _factory_dag(
        growth=GrowthSettings(factor=4), barrier=BarrierSettings(producer_refresh_grace_s=30.0)
    )
    params = dag.params
    assert set(params.keys()) == {"factor", "dry_run", "producer_refresh_grace_s",
                                  "barrier_timeout_s"}  # fmt: skip
    assert (params["factor"], params["dry_run"]) == (4, False)
    assert (params["producer_refresh_grace_s"], params["barrier_timeout_s"]) == (30.0, 3600.0)
    for name in params:
        param = params.get_param(name)
        assert param.schema["title"] and param.description, name  # explained in the form
    assert params.get_param("factor").schema["enum"] == [2, 4, 8, 16]
    grace_hint = params.get_param("producer_refresh_grace_s").description
    assert "s by default" in grace_hint and ".ms" not in grace_hint  # the field is in seconds
    plan, barrier = dag.get_task("plan"), dag.get_task("barrier")
    assert (plan.factor, plan.dry_run) == ("{{ params.factor }}", "{{ params.dry_run }}")
    assert barrier.producer_refresh_grace_s == "{{ params.producer_refresh_grace_s }}"
    assert barrier.barrier_timeout_s == "{{ params.barrier_timeout_s }}"


def test_the_users_params_replace_the_form_and_templates_stay():
    from airflow_samza_expand.dags import GrowthSettings

    assert dict(_factory_dag(params={}).params) == {}
    dag = _factory_dag(growth=GrowthSettings(factor="{{ params.f }}"), params={"f": 2})
    assert dict(dag.params) == {"f": 2} and dag.get_task("plan").factor == "{{ params.f }}"
    targets = _factory_dag(growth=GrowthSettings(targets={"orders": 8}))
    assert "factor" not in targets.params  # the targets decide the counts


def test_one_name_for_the_kafka_connection():
    from airflow_samza_expand.dags import KafkaSettings

    dag = _factory_dag(kafka=KafkaSettings(kafka_config_id="kafka_prod"))
    assert {t.kafka_config_id for t in dag.tasks if hasattr(t, "kafka_config_id")} == {"kafka_prod"}
    with pytest.raises(TypeError, match="kafka_conn_id"):
        _factory_dag(kafka_conn_id="kafka_old")
