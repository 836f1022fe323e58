"""Store layer: one `CoordinatorStore` (the record semantics) over a Kafka-log or file backend.

from airflow_samza_expand.store import CoordinatorStore, Lease, open_store, coordinator_topic

The coordinator URI is parsed here only (`parse_coordinator`): ``"kafka"`` (the default topic
``__samza_coordinator_<job>``), ``"kafka://<topic>"``, or a directory path / fsspec URL.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from airflow_samza_expand.core._lease import ACTIVE_LEASE, EXPANSION_LEASE, Lease
from airflow_samza_expand.store._coordinator_store import CoordinatorStore
from airflow_samza_expand.store._kinds import coordinator_topic

KAFKA_SCHEME = "kafka://"


class CoordinatorUri(NamedTuple):
    """A parsed coordinator URI: kind "kafka" (where: the topic, "" = the job's default topic)
    or "files" (where: the path or fsspec URL)."""

    kind: str
    where: str


def uses_kafka(uri: str) -> bool:
    """True for ``"kafka"`` and ``"kafka://<topic>"``."""
    text = str(uri).strip()
    return text == "kafka" or text.startswith(KAFKA_SCHEME)


def parse_coordinator(uri: str) -> CoordinatorUri:
    """The kind and location of a coordinator URI; ValueError naming the fix when empty."""
    text = str(uri).strip()
    if uses_kafka(text):
        return CoordinatorUri("kafka", text[len(KAFKA_SCHEME) :] if text != "kafka" else "")
    if not text:
        raise ValueError(
            "empty coordinator store location - pass 'kafka', 'kafka://<topic>', a directory "
            "path or an fsspec URL"
        )
    return CoordinatorUri("files", text)


def store_location(uri: str, kafka_config: Mapping[str, str] | None) -> tuple[str, str]:
    """("kafka", topic or "") for `"kafka"` / `"kafka://<topic>"`, else ("files", path or URL).

    ValueError naming the fix for an empty location or a Kafka store without a client config.
    """
    parsed = parse_coordinator(uri)
    if parsed.kind == "kafka" and not kafka_config:
        raise ValueError(
            f"coordinator store {str(uri).strip()!r} needs a Kafka client config - pass "
            "kafka_config (e.g. client_config(bootstrap_servers=...))"
        )
    return parsed.kind, parsed.where


def open_store(
    uri: str,
    job_name: str,
    kafka_config: Mapping[str, str] | None = None,
    *,
    timeout_s: float | None = None,
) -> CoordinatorStore:
    """`"kafka"` or `"kafka://<topic>"` -> KafkaCoordinatorStore; a path or fsspec URL -> files.
    `timeout_s`: the Kafka clients' wait (default 30 s)."""
    kind, where = store_location(uri, kafka_config)
    if kind == "kafka":
        from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

        extra = {} if timeout_s is None else {"timeout_s": timeout_s}
        return KafkaCoordinatorStore(kafka_config or {}, job_name, where or None, **extra)
    from airflow_samza_expand.store._files import FileCoordinatorStore

    return FileCoordinatorStore(where, job_name)


__all__ = [
    "ACTIVE_LEASE",
    "EXPANSION_LEASE",
    "CoordinatorStore",
    "CoordinatorUri",
    "Lease",
    "coordinator_topic",
    "open_store",
    "parse_coordinator",
    "store_location",
    "uses_kafka",
]
