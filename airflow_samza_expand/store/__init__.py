"""Store layer: the coordinator store protocol and its Kafka and file implementations.

from airflow_samza_expand.store import CoordinatorStore, Lease, open_store, coordinator_topic
"""

from __future__ import annotations

from collections.abc import Mapping

from airflow_samza_expand.core.lease import ACTIVE_LEASE, EXPANSION_LEASE, Lease
from airflow_samza_expand.store.protocol import CoordinatorStore, coordinator_topic


def store_location(uri: str, kafka_config: Mapping[str, str] | None) -> tuple[str, str]:
    """("kafka", topic or "") for `"kafka"` / `"kafka://<topic>"`, else ("files", path or URL).

    ValueError naming the fix for an empty location or a Kafka store without a client config.
    """
    text = str(uri).strip()
    if text == "kafka" or text.startswith("kafka://"):
        if not kafka_config:
            raise ValueError(
                f"coordinator store {text!r} needs a Kafka client config - pass kafka_config "
                "(e.g. client_config(bootstrap_servers=...))"
            )
        return "kafka", text[len("kafka://") :] if text.startswith("kafka://") else ""
    if not text:
        raise ValueError(
            "empty coordinator store location - pass 'kafka', 'kafka://<topic>', a directory "
            "path or an fsspec URL"
        )
    return "files", text


def open_store(
    uri: str, job_name: str, kafka_config: Mapping[str, str] | None = None
) -> CoordinatorStore:
    """`"kafka"` or `"kafka://<topic>"` -> KafkaCoordinatorStore; a path or fsspec URL -> files."""
    kind, where = store_location(uri, kafka_config)
    if kind == "kafka":
        from airflow_samza_expand.store.kafka import KafkaCoordinatorStore

        return KafkaCoordinatorStore(kafka_config or {}, job_name, where or None)
    from airflow_samza_expand.store.files import FileCoordinatorStore

    return FileCoordinatorStore(where, job_name)


__all__ = [
    "ACTIVE_LEASE",
    "EXPANSION_LEASE",
    "CoordinatorStore",
    "Lease",
    "coordinator_topic",
    "open_store",
    "store_location",
]
