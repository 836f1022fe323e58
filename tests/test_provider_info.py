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
