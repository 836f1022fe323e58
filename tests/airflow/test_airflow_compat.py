"""airflow/_compat.py: the private Airflow and provider APIs behind one module, the pinned range."""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace

import airflow_env  # noqa: F401, I001 - sets AIRFLOW_HOME before anything imports airflow
import pytest
from airflow.providers.apache.kafka.hooks.base import KafkaBaseHook
from packaging.requirements import Requirement

from airflow_samza_expand.airflow import _compat

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _requirement(name: str) -> Requirement:
    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    return next(r for r in map(Requirement, deps) if r.name == name)


def test_the_installed_kafka_provider_is_in_the_pinned_range_and_has_what_compat_calls():
    pinned = _requirement(_compat.KAFKA_PROVIDER)
    assert str(pinned.specifier) == str(Requirement(f"x{_compat.TESTED_KAFKA_PROVIDER}").specifier)
    assert pinned.specifier.contains(version(_compat.KAFKA_PROVIDER))
    sdk = _requirement("apache-airflow-task-sdk")
    assert sdk.specifier.contains(version("apache-airflow-task-sdk"))
    for name in ("_build_config", "_resolve_callbacks", "_maybe_add_msk_iam_oauth"):
        assert callable(getattr(KafkaBaseHook, name, None)), name


def test_hook_methods_pass_through_and_a_missing_one_names_the_range():
    calls: list[tuple] = []
    hook = SimpleNamespace(
        _build_config=lambda: {"bootstrap.servers": "b:9092"},
        _resolve_callbacks=lambda config: calls.append(("resolve", dict(config))),
        _maybe_add_msk_iam_oauth=lambda config, bootstrap: calls.append(("msk", bootstrap)),
    )
    assert _compat.kafka_connection_config(hook) == {"bootstrap.servers": "b:9092"}
    _compat.resolve_kafka_callbacks(hook, {"a": 1})
    _compat.add_msk_iam_oauth(hook, {}, "b:9098")
    assert calls == [("resolve", {"a": 1}), ("msk", "b:9098")]
    with pytest.raises(_compat.PrivateApiMissing) as missing:
        _compat.kafka_connection_config(SimpleNamespace())
    text = str(missing.value)
    assert "KafkaBaseHook._build_config" in text and _compat.TESTED_KAFKA_PROVIDER in text


def test_secrets_masker_and_mapped_argument():
    assert _compat.airflow_hides_key("password") and _compat.airflow_hides_key("my_api_key")
    assert not _compat.airflow_hides_key("bootstrap.servers")
    assert not _compat.is_mapped_argument("orders-counter")


def test_no_module_outside_compat_uses_a_private_airflow_api():
    package = Path(_compat.__file__).resolve().parents[1]
    private = ("._build_config", "._resolve_callbacks", "._maybe_add_msk_iam_oauth",
               "sdk._shared", "._internal", "XComModel", "requires_access_view",
               "_openlineage_inject", "update_dag_parsing_results_in_db",
               "LazyDeserializedDAG", "DagBundlesManager")  # fmt: skip
    offenders = [
        f"{path.relative_to(package)}: {needle}"
        for path in package.rglob("*.py")
        if path.name != "_compat.py"
        for needle in private
        if needle in path.read_text()
    ]
    assert offenders == []


def test_openlineage_injection_reads_the_spark_operators_flags():
    assert _compat.openlineage_injection(SimpleNamespace()) == (False, False)
    operator = SimpleNamespace(
        _openlineage_inject_parent_job_info=True, _openlineage_inject_transport_info=False
    )
    assert _compat.openlineage_injection(operator) == (True, False)
