"""The reference's parameter tables match the code users import.

Each operator, sensor and trigger section of docs/reference.md must name every parameter of the
class's ``__init__`` (except the ones the page states once for all: ``coordinator``,
``kafka_config_id``, ``request_timeout_s``, ``deferrable``) and nothing that is not one; every
parameter of ``build_expansion_dag`` and every ``ExpansionSettings`` field must be mentioned,
every field of a settings group (``JobSettings`` ...) has its row, and so must every option of
the shipped job, the demo and the operator commands. The README's factory example builds its
DAG. Signatures are read in a subprocess with a temporary
AIRFLOW_HOME, so this module never imports Airflow itself.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
README = (REPO / "README.md").read_text()
REFERENCE = (REPO / "docs" / "reference.md").read_text()
CLASSES = {
    "PlanExpansionOperator": "airflow_samza_expand.airflow.operators",
    "ExpandPartitionsOperator": "airflow_samza_expand.airflow.operators",
    "StopStatefulJobOperator": "airflow_samza_expand.airflow.operators",
    "WriteJobModelOperator": "airflow_samza_expand.airflow.operators",
    "OrderingBarrierSensor": "airflow_samza_expand.airflow.sensors",
    "JobModelAckSensor": "airflow_samza_expand.airflow.sensors",
    "PartitionCountSensor": "airflow_samza_expand.airflow.sensors",
    "OrderingBarrierTrigger": "airflow_samza_expand.airflow.triggers",
    "JobModelAckTrigger": "airflow_samza_expand.airflow.triggers",
    "PartitionCountChangeTrigger": "airflow_samza_expand.airflow.triggers",
}
STATED_ONCE = {"coordinator", "kafka_config_id", "request_timeout_s", "deferrable"}


@pytest.fixture(scope="module")
def signatures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    probe = (
        "import importlib, inspect, json, sys\n"
        "classes = json.loads(sys.argv[1])\n"
        "out = {}\n"
        "for name, module in classes.items():\n"
        "    cls = getattr(importlib.import_module(module), name)\n"
        "    out[name] = [p for p in inspect.signature(cls.__init__).parameters\n"
        "                 if p not in ('self', 'kwargs')]\n"
        "from airflow_samza_expand.dags import build_expansion_dag\n"
        "out['build_expansion_dag'] = list(inspect.signature(build_expansion_dag).parameters)\n"
        "import dataclasses\n"
        "from airflow_samza_expand.dags import ExpansionSettings\n"
        "out['ExpansionSettings'] = [f.name for f in dataclasses.fields(ExpansionSettings)]\n"
        "from airflow_samza_expand.dags import _groups\n"
        "out['groups'] = {c.__name__: [f.name for f in dataclasses.fields(c)]\n"
        "                 for c in _groups.GROUPS.values()}\n"
        "print(json.dumps(out))\n"
    )
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path_factory.mktemp("airflow-home"))}
    result = subprocess.run(
        [sys.executable, "-c", probe, json.dumps(CLASSES)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def readme_row(name: str) -> str:
    """The parameter list of the class's section in docs/reference.md (``### `Name` ``)."""
    sections = re.findall(rf"^### `{name}`\n(.*?)(?=^##)", REFERENCE + "\n##", re.S | re.M)
    assert len(sections) == 1, f"docs/reference.md must have one section for {name}"
    params = sections[0].split("Parameters (default):", 1)
    assert len(params) == 2, f"{name}: its section has no 'Parameters (default):' list"
    bullets = re.match(r"\s*((?:\* .*\n)+)", params[1])
    assert bullets, f"{name}: 'Parameters (default):' is not followed by a list"
    return bullets.group(1)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_readme_row_names_exactly_the_parameters(name: str, signatures: dict) -> None:
    documented = set(re.findall(r"`([a-z_][a-z0-9_]*)(?=[`=\s])", readme_row(name)))
    actual = set(signatures[name])
    assert sorted(actual - STATED_ONCE - documented) == [], f"{name}: missing in the reference"
    assert sorted(documented - actual) == [], f"{name}: the reference names unknown parameters"


def test_readme_mentions_every_factory_parameter(signatures: dict) -> None:
    code_spans = " ".join(re.findall(r"`([^`]*)`", REFERENCE))
    words = set(re.findall(r"[a-z_][a-z0-9_]*", code_spans))
    names = signatures["build_expansion_dag"] + signatures["ExpansionSettings"]
    missing = [p for p in names if p not in words]
    assert missing == [], f"factory parameters missing in docs/reference.md: {missing}"


def test_the_reference_has_a_row_for_every_field_of_every_settings_group(signatures: dict) -> None:
    rows = re.findall(r"^\| `(\w+Settings)` \| ([^|]*) \|", REFERENCE, re.M)
    documented = {(group, name) for group, cell in rows for name in re.findall(r"`(\w+)`", cell)}
    actual = {(group, name) for group, names in signatures["groups"].items() for name in names}
    assert sorted(actual - documented) == [], "settings group fields missing in docs/reference.md"
    assert sorted(documented - actual) == [], "docs/reference.md names unknown group fields"


def test_readme_factory_example_builds_the_dag(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    example = next((b for b in blocks if "build_expansion_dag(" in b), None)
    assert example is not None, "README.md lost its build_expansion_dag example"
    probe = example + "\nprint(sorted(dag.task_ids))\n"
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    task_ids = result.stdout.strip().splitlines()[-1]
    for task_id in ("plan", "expand", "barrier", "stop_job", "write_job_model", "submit", "ack"):
        assert f"'{task_id}'" in task_ids, task_ids


def test_readme_names_every_option_of_the_spark_job() -> None:
    from airflow_samza_expand.spark.job import build_parser

    options = [
        option
        for action in build_parser()._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    ]
    assert options, "the job has no options - update this test"
    missing = [option for option in options if f"`{option}" not in REFERENCE]
    assert missing == [], f"spark job options missing in docs/reference.md: {missing}"


def test_readme_names_every_option_of_the_demo() -> None:
    import argparse

    from airflow_samza_expand.cli import build_parser

    root = build_parser(only="demo")
    subparsers = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    demo = subparsers.choices["demo"]
    options = [
        option
        for action in demo._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    ]
    assert options, "the demo has no options - update this test"
    missing = [option for option in options if f"`{option}" not in REFERENCE]
    assert missing == [], f"demo options missing in docs/reference.md: {missing}"


@pytest.mark.parametrize("command", ["plan", "init-job", "status", "stop"])
def test_the_reference_names_every_option_of_the_operator_commands(command: str) -> None:
    import argparse

    from airflow_samza_expand.cli import build_parser

    root = build_parser(only=command)
    subparsers = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    options = [
        option
        for action in subparsers.choices[command]._actions
        if action.help != argparse.SUPPRESS  # the old spellings, hidden
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    ]
    row = next(line for line in REFERENCE.splitlines() if line.startswith(f"| `{command}` |"))
    missing = [option for option in options if f"`{option}" not in row]
    assert missing == [], f"samza-expand {command} options missing in docs/reference.md: {missing}"
