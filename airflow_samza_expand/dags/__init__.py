"""The expansion DAG factory: ``build_expansion_dag`` and ``expansion_task_group``, and the
groups of their settings (``JobSettings``, ``KafkaSettings``, ``SparkSettings``,
``BarrierSettings``, ``RestartSettings``, ``OwnershipSettings``, ``GrowthSettings``), and the
modes they take by name (``RunMode``, ``Restart``, ``OnStalePlacement``, ``OtherJobs``).

Imported lazily: importing the package does not load Airflow (nor do the settings groups).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_samza_expand.dags._factory import (
        ExpansionSettings,
        build_expansion_dag,
        expansion_task_group,
        stream_job_args,
        stream_job_args_from_env,
    )
    from airflow_samza_expand.dags._groups import (
        BarrierSettings,
        GrowthSettings,
        JobSettings,
        KafkaSettings,
        OnStalePlacement,
        OtherJobs,
        OwnershipSettings,
        Restart,
        RestartSettings,
        RunMode,
        SparkSettings,
    )

__all__ = [
    "BarrierSettings",
    "GrowthSettings",
    "JobSettings",
    "KafkaSettings",
    "OnStalePlacement",
    "OtherJobs",
    "OwnershipSettings",
    "Restart",
    "RestartSettings",
    "RunMode",
    "SparkSettings",
    "ExpansionSettings",
    "build_expansion_dag",
    "expansion_task_group",
    "stream_job_args",
    "stream_job_args_from_env",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from airflow_samza_expand.dags import _groups

        if hasattr(_groups, name):  # a settings group: Airflow is not loaded
            return getattr(_groups, name)
        from airflow_samza_expand.dags import _factory

        return getattr(_factory, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
