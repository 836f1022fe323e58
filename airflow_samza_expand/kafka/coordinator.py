"""Compatibility shim: the coordinator stores moved to `airflow_samza_expand.store`.

The classes here keep the old *untyped* expansion API (``put_expansion(id, dict)``,
``get_expansion(id) -> dict``) for callers not yet moved to `ExpansionRecord` and conditional
updates; everything else is the store package's. Import from `airflow_samza_expand.store`
in new code; this module goes away once nothing imports it.
"""

from __future__ import annotations

from collections.abc import Mapping

from airflow_samza_expand.core.clock import now_iso as now_iso_ms
from airflow_samza_expand.kafka.admin import KafkaUnavailableError
from airflow_samza_expand.store import files as _files
from airflow_samza_expand.store import kafka as _kafka
from airflow_samza_expand.store import store_location
from airflow_samza_expand.store.kafka_io import COORDINATOR_TOPIC_CONFIG
from airflow_samza_expand.store.kafka_log import encode_key
from airflow_samza_expand.store.protocol import (
    CONTROL,
    EXPANSION,
    JOB_MODEL,
    PROCESSOR,
    PROCESSOR_STATES,
    STOP_KEY,
    CoordinatorStore,
    coordinator_topic,
)
from airflow_samza_expand.store.records import default_writer_id


class KafkaCoordinatorStore(_kafka.KafkaCoordinatorStore):
    """`store.kafka.KafkaCoordinatorStore` with the legacy dict expansion API."""

    def put_expansion(self, expansion_id: str, record: Mapping) -> None:  # type: ignore[override]
        self.put_expansion_doc(expansion_id, record)

    def get_expansion(self, expansion_id: str) -> dict | None:  # type: ignore[override]
        return self.get_expansion_doc(expansion_id)


class FileCoordinatorStore(_files.FileCoordinatorStore):
    """`store.files.FileCoordinatorStore` with the legacy dict expansion API."""

    def put_expansion(self, expansion_id: str, record: Mapping) -> None:  # type: ignore[override]
        self.put_expansion_doc(expansion_id, dict(record))

    def get_expansion(self, expansion_id: str) -> dict | None:  # type: ignore[override]
        return self.get_expansion_doc(expansion_id)


def open_store(
    uri: str, job_name: str, kafka_config: Mapping[str, str] | None = None
) -> KafkaCoordinatorStore | FileCoordinatorStore:
    """`"kafka"` or `"kafka://<topic>"` -> KafkaCoordinatorStore; a path or fsspec URL -> files."""
    kind, where = store_location(uri, kafka_config)
    if kind == "kafka":
        return KafkaCoordinatorStore(kafka_config or {}, job_name, where or None)
    return FileCoordinatorStore(where, job_name)


__all__ = [
    "CONTROL",
    "COORDINATOR_TOPIC_CONFIG",
    "EXPANSION",
    "JOB_MODEL",
    "PROCESSOR",
    "PROCESSOR_STATES",
    "STOP_KEY",
    "CoordinatorStore",
    "FileCoordinatorStore",
    "KafkaCoordinatorStore",
    "KafkaUnavailableError",
    "coordinator_topic",
    "default_writer_id",
    "encode_key",
    "now_iso_ms",
    "open_store",
]
