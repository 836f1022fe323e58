"""The Kafka hook of the expansion: the apache-kafka provider's connection, our clients."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.kafka.hooks.base import KafkaBaseHook

from airflow_samza_expand._kafka.config import redact
from airflow_samza_expand.airflow._compat import (
    add_msk_iam_oauth,
    kafka_connection_config,
    resolve_kafka_callbacks,
)

if TYPE_CHECKING:
    from airflow_samza_expand.store import CoordinatorStore

DEFAULT_COORDINATOR = "kafka"


class SamzaExpandKafkaHook(KafkaBaseHook):
    """Builds the expansion's Kafka clients from an Airflow Kafka connection.

    The connection is the apache-kafka provider's ``kafka`` type (default ``kafka_default``):
    its extra is the librdkafka configuration (``bootstrap.servers``, ``security.protocol``,
    ``sasl.*``, ``ssl.*`` ...), passed through unchanged, with callbacks resolved as the
    provider does. Secrets are never logged: log lines use :func:`_kafka.config.redact`.
    """

    hook_name = "Apache Kafka (Samza partition expansion)"

    def client_config(self) -> dict[str, Any]:
        """The librdkafka configuration of the connection (blocking: reads the connection)."""
        config = kafka_connection_config(self)
        self.log.info("Kafka connection %r: %s", self.kafka_config_id, redact(_printable(config)))
        return config

    async def aclient_config(self) -> dict[str, Any]:
        """Like :meth:`client_config`, for triggers: reads the connection without blocking."""
        conn = await self.aget_connection(self.kafka_config_id)
        return self.config_from_extra(conn.extra_dejson)

    def config_from_extra(self, extra: Mapping[str, Any]) -> dict[str, Any]:
        """librdkafka configuration from a connection extra (callbacks resolved, MSK IAM added)."""
        config = dict(extra)
        resolve_kafka_callbacks(self, config)
        bootstrap = config.get("bootstrap.servers")
        if not bootstrap:
            raise ValueError(
                f"Kafka connection {self.kafka_config_id!r} has no 'bootstrap.servers' in its "
                'extra - set the extra to e.g. {"bootstrap.servers": "broker:9092"}.'
            )
        add_msk_iam_oauth(self, config, bootstrap)
        return config

    def get_admin(self, config: Mapping[str, Any] | None = None, *, timeout_s: float = 30.0):
        """A :class:`~airflow_samza_expand._kafka.admin.KafkaAdmin` on this connection."""
        from airflow_samza_expand._kafka.admin import KafkaAdmin

        return KafkaAdmin(self.client_config() if config is None else config, timeout_s=timeout_s)

    def get_coordinator_store(
        self,
        job_name: str,
        coordinator: str = DEFAULT_COORDINATOR,
        config: Mapping[str, Any] | None = None,
    ) -> CoordinatorStore:
        """The job's coordinator store: ``"kafka"``/``"kafka://<topic>"`` or a path/fsspec URL."""
        from airflow_samza_expand.store import open_store, uses_kafka

        kafka_config = None
        if uses_kafka(coordinator):
            kafka_config = self.client_config() if config is None else dict(config)
        return open_store(coordinator, job_name, kafka_config=kafka_config)


def _printable(config: Mapping[str, Any]) -> dict[str, Any]:
    """Callables shown by name, so a log line never calls or dumps them."""
    return {
        key: (getattr(value, "__name__", type(value).__name__) if callable(value) else value)
        for key, value in config.items()
    }


__all__ = ["DEFAULT_COORDINATOR", "SamzaExpandKafkaHook"]
