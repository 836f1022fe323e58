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
    "airflow_samza_expand.airflow.operators.submit.SubmitStreamJobOperator",
    "airflow_samza_expand.airflow.operators.report.ExpansionReportOperator",
    "airflow_samza_expand.airflow.operators.standby.LaunchStandbyOperator",
    "airflow_samza_expand.airflow.operators.jobs_report.JobsReportOperator",
    "airflow_samza_expand.airflow.sensors.OrderingBarrierSensor",
    "airflow_samza_expand.airflow.sensors.JobModelAckSensor",
    "airflow_samza_expand.airflow.sensors.PartitionCountSensor",
    "airflow_samza_expand.airflow.triggers.OrderingBarrierTrigger",
    "airflow_samza_expand.airflow.triggers.JobModelAckTrigger",
    "airflow_samza_expand.airflow.triggers.PartitionCountChangeTrigger",
    "airflow_samza_expand.airflow.triggers.ExpansionLeaseTrigger",
]


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
                "python-modules": [
                    "airflow_samza_expand.airflow.operators",
                    "airflow_samza_expand.airflow.operators.plan",
                    "airflow_samza_expand.airflow.operators.expand",
                    "airflow_samza_expand.airflow.operators.stop",
                    "airflow_samza_expand.airflow.operators.write_model",
                    "airflow_samza_expand.airflow.operators.submit",
                    "airflow_samza_expand.airflow.operators.report",
                    "airflow_samza_expand.airflow.operators.standby",
                    "airflow_samza_expand.airflow.operators.jobs_report",
                ],
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
    }
