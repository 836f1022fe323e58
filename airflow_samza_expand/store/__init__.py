"""Store layer: the coordinator store protocol and its Kafka and file implementations.

from airflow_samza_expand.store import CoordinatorStore, Lease, open_store, coordinator_topic
"""

from __future__ import annotations

from collections.abc import Mapping

from airflow_samza_expand.core.lease import ACTIVE_LEASE, EXPANSION_LEASE, Lease
from airflow_samza_expand.store.protocol import CoordinatorStore, coordinator_topic


def open_store(
    uri: str, job_name: str, kafka_config: Mapping[str, str] | None = None
) -> CoordinatorStore:
    """`"kafka"` or `"kafka://<topic>"` -> KafkaCoordinatorStore; a path or fsspec URL -> files."""
    text = str(uri).strip()
    if text == "kafka" or text.startswith("kafka://"):
        if not kafka_config:
            raise ValueError(
                f"coordinator store {text!r} needs a Kafka client config - pass kafka_config "
                "(e.g. client_config(bootstrap_servers=...))"
            )
        from airflow_samza_expand.store.kafka import KafkaCoordinatorStore

        topic = text[len("kafka://") :] if text.startswith("kafka://") else ""
        return KafkaCoordinatorStore(kafka_config, job_name, topic or None)
    if not text:
        raise ValueError(
            "empty coordinator store location - pass 'kafka', 'kafka://<topic>', a directory "
            "path or an fsspec URL"
        )
    from airflow_samza_expand.store.files import FileCoordinatorStore

    return FileCoordinatorStore(text, job_name)


__all__ = [
    "ACTIVE_LEASE",
    "EXPANSION_LEASE",
    "CoordinatorStore",
    "Lease",
    "coordinator_topic",
    "open_store",
]
