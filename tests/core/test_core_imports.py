"""The core layer imports neither Airflow, confluent_kafka nor pyspark (checked in a fresh process
so that other tests' imports cannot hide or fake a violation)."""

from __future__ import annotations

import json
import subprocess
import sys

FORBIDDEN = ("airflow", "confluent_kafka", "pyspark")
CORE_MODULES = (
    "airflow_samza_expand.core",
    "airflow_samza_expand.core.errors",
    "airflow_samza_expand.core.model",
    "airflow_samza_expand.core.expansion",
    "airflow_samza_expand.core.groupers",
    "airflow_samza_expand.core._plan",
    "airflow_samza_expand.core._clock",
    "airflow_samza_expand.core._record",
    "airflow_samza_expand.core._lease",
    "airflow_samza_expand.core._secrets",
    "airflow_samza_expand.core._validate",
    "airflow_samza_expand.core._render",
    "airflow_samza_expand.core._names",
    "airflow_samza_expand._protocol.cli.plan",
    "airflow_samza_expand._kafka.partitioners",
)

PROBE = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps(sorted(sys.modules)))
"""


def loaded_modules(*modules: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *modules],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(result.stdout)


def offending(modules: list[str]) -> list[str]:
    return [m for m in modules if m.split(".")[0] in FORBIDDEN]


def test_core_imports_no_airflow_kafka_or_spark():
    modules = loaded_modules(*CORE_MODULES)
    assert "airflow_samza_expand.core._plan" in modules
    assert offending(modules) == []


def test_probe_detects_a_forbidden_import():
    """The check above can fail: importing confluent_kafka is seen."""
    assert offending(loaded_modules("confluent_kafka")) != []
