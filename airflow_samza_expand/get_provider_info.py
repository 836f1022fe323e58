"""Provider metadata read by Airflow's providers manager (entry point `apache_airflow_provider`)."""

from __future__ import annotations

from typing import Any

from airflow_samza_expand import __version__

PACKAGE_NAME = "airflow-samza-expand"


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
                "integration-name": "Samza-style partition expansion",
                "external-doc-url": "https://kafka.apache.org/documentation/",
                "tags": ["apache"],
            }
        ],
        "hooks": [],
        "operators": [],
        "sensors": [],
        "triggers": [],
        "connection-types": [],
        "plugins": [],
    }
