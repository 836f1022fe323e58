"""Provider metadata read by Airflow's providers manager (entry point `apache_airflow_provider`)."""

from __future__ import annotations

from typing import Any

from airflow_samza_expand import __version__

PACKAGE_NAME = "airflow-samza-expand"
INTEGRATION = "Samza-style partition expansion"

# Every public class of the Airflow surface, by import path; each lives in a module listed
# below (tests import every one).
CLASSES: list[str] = [
    "airflow_samza_expand.airflow.hooks.SamzaExpandKafkaHook",
    "airflow_samza_expand.airflow.operators.PlanExpansionOperator",
    "airflow_samza_expand.airflow.operators.ExpandPartitionsOperator",
    "airflow_samza_expand.airflow.operators.StopStatefulJobOperator",
    "airflow_samza_expand.airflow.operators.WriteJobModelOperator",
    "airflow_samza_expand.airflow.operators.SubmitStreamJobOperator",
    "airflow_samza_expand.airflow.operators.RestartGateOperator",
    "airflow_samza_expand.airflow.operators.ExpansionReportOperator",
    "airflow_samza_expand.airflow.operators.LaunchStandbyOperator",
    "airflow_samza_expand.airflow.operators.JobsReportOperator",
    "airflow_samza_expand.airflow.sensors.OrderingBarrierSensor",
    "airflow_samza_expand.airflow.sensors.JobModelAckSensor",
    "airflow_samza_expand.airflow.sensors.PartitionCountSensor",
    "airflow_samza_expand.airflow.triggers.OrderingBarrierTrigger",
    "airflow_samza_expand.airflow.triggers.JobModelAckTrigger",
    "airflow_samza_expand.airflow.triggers.PartitionCountChangeTrigger",
    "airflow_samza_expand.airflow.triggers.ExpansionLeaseTrigger",
    "airflow_samza_expand.airflow.triggers.JobStopTrigger",
    "airflow_samza_expand.airflow.triggers.JobBackTrigger",
]


# Operator links Airflow attaches to tasks (the plugin registers them too).
EXTRA_LINKS: list[str] = ["airflow_samza_expand.airflow._ui.links.ExpansionJobLink"]

# Section [samza_expand]: option -> (description, type, default, example); the defaults are
# airflow/_ui/settings.py's (tests/project/test_provider_info.py holds the two together).
SECTION = "samza_expand"
CONFIG_OPTIONS: dict[str, tuple[str, str, str | None, str]] = {
    "ui_jobs": (
        "Job names the UI lists even before they have records (comma-separated).",
        "string", "", "orders-counter,orders-audit",
    ),
    "ui_kafka_config_id": (
        "The Airflow connection of the Kafka the UI reads the coordinator topics from.",
        "string", "kafka_default", "kafka_prod",
    ),
    "ui_coordinator": (
        "Where the jobs' coordinator stores are: 'kafka' (topic __samza_coordinator_<job>), "
        "'kafka://<topic>', or a directory / fsspec URL of a file store.",
        "string", "kafka", "kafka",
    ),
    "ui_discover": (
        "List every job that has a __samza_coordinator_* topic on the connection's Kafka.",
        "boolean", "True", "False",
    ),
    "ui_processor_ttl_s": (
        "A processor whose heartbeat is older than this (seconds) is shown dead, when its "
        "record carries no TTL of its own.",
        "float", "30.0", "60",
    ),
    "ui_timeout_s": (
        "Each Kafka read of a page gives up after this many seconds.",
        "float", "5.0", "10",
    ),
    "ui_log_dirs": (
        "Directories whose spark-submit logs of the expansion's launches the job page shows "
        "(comma-separated; default: <temp dir>/samza-expand).",
        "string", None, "/var/log/samza-expand",
    ),
}  # fmt: skip


def get_provider_info() -> dict[str, Any]:
    """Describe this provider: its package, and the hooks, operators, sensors, triggers, plugins."""
    return {
        "package-name": PACKAGE_NAME,
        "name": "Samza-style Kafka partition expansion",
        "description": (
            "Expand the Kafka input topics of a live stateful stream job without breaking its "
            "state or per-key order: SEP-5 fixed-task mapping plus an ordering barrier."
        ),
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": INTEGRATION,
                "external-doc-url": "https://kafka.apache.org/documentation/",
                "tags": ["apache"],
            }
        ],
        "hooks": [
            {
                "integration-name": INTEGRATION,
                "python-modules": ["airflow_samza_expand.airflow.hooks"],
            }
        ],
        "operators": [
            {
                "integration-name": INTEGRATION,
                "python-modules": ["airflow_samza_expand.airflow.operators"],
            }
        ],
        "sensors": [
            {
                "integration-name": INTEGRATION,
                "python-modules": ["airflow_samza_expand.airflow.sensors"],
            }
        ],
        "triggers": [
            {
                "integration-name": INTEGRATION,
                "python-modules": ["airflow_samza_expand.airflow.triggers"],
            }
        ],
        # The hook uses the apache-kafka provider's "kafka" connection type (kafka_default);
        # registering "kafka" a second time would clash with that provider.
        "connection-types": [],
        "plugins": [
            {
                "name": "samza_expand",
                "plugin-class": "airflow_samza_expand.airflow.plugins.SamzaExpandPlugin",
            }
        ],
        "extra-links": EXTRA_LINKS,
        "config": {
            SECTION: {
                "description": "The expansion UI (the plugin's job pages and JSON API), read on "
                "every request; AIRFLOW__SAMZA_EXPAND__<OPTION> environment variables work too.",
                "options": {name: _option(*spec) for name, spec in CONFIG_OPTIONS.items()},
            }
        },
    }


def _option(description: str, kind: str, default: str | None, example: str) -> dict[str, Any]:
    return {
        "description": description,
        "version_added": "0.1.0",
        "type": kind,
        "example": example,
        "default": default,
    }


__all__ = ["get_provider_info"]
