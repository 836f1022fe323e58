"""Every private Airflow or provider API this package uses, in one place.

Tested with the versions pinned in ``pyproject.toml`` (apache-airflow 3.1-3.3, task SDK 1.x,
apache-airflow-providers-apache-kafka 2.x). Each function below uses a private API where
that is the only way to do the job (the apache-kafka provider's connection-to-config
building, the secrets masker's field names, the mapped-argument type, the XCom table) and
either falls back to an older location or raises `PrivateApiMissing` naming the package to
install - never a bare AttributeError deep in a task.
"""

from __future__ import annotations

import importlib
from typing import Any

KAFKA_PROVIDER = "apache-airflow-providers-apache-kafka"
TESTED_KAFKA_PROVIDER = ">=2.1,<3"


class PrivateApiMissing(RuntimeError):
    """An Airflow or provider version outside the tested range lacks a private API we use."""


def _missing(what: str, package: str, tested: str) -> PrivateApiMissing:
    return PrivateApiMissing(
        f"{what} is missing in the installed {package}: airflow-samza-expand calls it - install "
        f"{package}{tested} (the range pyproject.toml pins and the tests run)"
    )


def _hook_method(hook: Any, name: str) -> Any:
    method = getattr(hook, name, None)
    if method is None:
        raise _missing(f"KafkaBaseHook.{name}", KAFKA_PROVIDER, TESTED_KAFKA_PROVIDER)
    return method


def kafka_connection_config(hook: Any) -> dict[str, Any]:
    """The librdkafka config of a `KafkaBaseHook`'s connection, built as the provider does
    (``_build_config``: callbacks resolved, Google / MSK OAuth callbacks added)."""
    return dict(_hook_method(hook, "_build_config")())


def resolve_kafka_callbacks(hook: Any, config: dict[str, Any]) -> None:
    """Replace dotted-path callback strings in `config` by the callables (in place), as the
    provider does (``_resolve_callbacks``, with its allow-list)."""
    _hook_method(hook, "_resolve_callbacks")(config)


def add_msk_iam_oauth(hook: Any, config: dict[str, Any], bootstrap: str) -> None:
    """Add the Amazon MSK IAM OAuth callback when `bootstrap` is an MSK IAM listener
    (``_maybe_add_msk_iam_oauth``; in place)."""
    _hook_method(hook, "_maybe_add_msk_iam_oauth")(config, bootstrap)


# where the task SDK keeps its secrets masker, newest first
SECRETS_MASKER_MODULES = (
    "airflow.sdk._shared.secrets_masker",
    "airflow.sdk.execution_time.secrets_masker",
)


def airflow_hides_key(key: str) -> bool:
    """True when Airflow's secrets masker hides values of a field named `key` (its sensitive
    field names and ``[core] sensitive_var_conn_names``); False when no masker is found
    (callers add their own patterns)."""
    for module in SECRETS_MASKER_MODULES:
        try:
            should_hide = importlib.import_module(module).should_hide_value_for_key
        except (ImportError, AttributeError):
            continue
        return bool(should_hide(key))
    return False


def is_mapped_argument(value: Any) -> bool:
    """True for an argument of a mapped task group (resolved per instance at run time)."""
    try:
        from airflow.sdk.definitions._internal.expandinput import MappedArgument
    except ImportError:
        raise _missing(
            "airflow.sdk.definitions._internal.expandinput.MappedArgument",
            "apache-airflow-task-sdk",
            ">=1.1,<2",
        ) from None
    return isinstance(value, MappedArgument)


def task_xcom(
    dag_id: str, run_id: str, task_id: str, map_index: int | None, key: str = "return_value"
) -> Any:
    """The deserialized XCom `key` of one task instance (`map_index` None: any), read from the
    metadata database (``XComModel`` with a session: no public reader outside a task), or None."""
    try:
        from airflow.models.xcom import XComModel
        from airflow.utils.session import create_session
    except ImportError:
        raise _missing("airflow.models.xcom.XComModel", "apache-airflow", ">=3.1,<4") from None
    with create_session() as session:
        row = session.scalars(
            XComModel.get_many(
                key=key,
                run_id=run_id,
                dag_ids=dag_id,
                task_ids=task_id,
                map_indexes=map_index,
            )
        ).first()
        return XComModel.deserialize_value(row) if row is not None else None


def website_access() -> Any:
    """The FastAPI dependency that lets in a user who may see Airflow's website (the plugin's
    pages): ``requires_access_view(AccessView.WEBSITE)`` of Airflow's core API."""
    try:
        from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
        from airflow.api_fastapi.core_api.security import requires_access_view
    except ImportError:
        raise _missing(
            "airflow.api_fastapi.core_api.security.requires_access_view", "apache-airflow",
            ">=3.1,<4",
        ) from None  # fmt: skip
    return requires_access_view(AccessView.WEBSITE)


def openlineage_injection(operator: Any) -> tuple[bool, bool]:
    """(parent job, transport): whether a ``SparkSubmitOperator`` (apache-spark provider >= 5.1,
    its private ``_openlineage_inject_*`` attributes) injects OpenLineage's parent job and
    transport settings; (False, False) where the provider has no such attributes."""
    return (
        bool(getattr(operator, "_openlineage_inject_parent_job_info", False)),
        bool(getattr(operator, "_openlineage_inject_transport_info", False)),
    )


def register_dag(dag: Any, bundle_name: str) -> None:
    """Register ``dag`` in the metadata database as the DAG processor would (the bundles, then
    the DAG's parsing result): what ``dag.test()`` needs for a DAG built in code."""
    try:
        from airflow.dag_processing.bundles.manager import DagBundlesManager
        from airflow.dag_processing.collection import update_dag_parsing_results_in_db
        from airflow.serialization.serialized_objects import LazyDeserializedDAG
        from airflow.utils.session import create_session
    except ImportError:
        raise _missing("airflow.dag_processing (DAG registration)", "apache-airflow",
                       ">=3.1,<4") from None  # fmt: skip
    with create_session() as session:
        DagBundlesManager().sync_bundles_to_db(session=session)
        session.commit()
        update_dag_parsing_results_in_db(
            bundle_name, None, [LazyDeserializedDAG.from_dag(dag)], {}, None, set(), session=session
        )


__all__ = [
    "KAFKA_PROVIDER",
    "TESTED_KAFKA_PROVIDER",
    "PrivateApiMissing",
    "add_msk_iam_oauth",
    "airflow_hides_key",
    "is_mapped_argument",
    "kafka_connection_config",
    "openlineage_injection",
    "register_dag",
    "resolve_kafka_callbacks",
    "task_xcom",
    "website_access",
]
