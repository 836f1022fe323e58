"""What every task of the Airflow surface shares: its Kafka clients (one hook, clients built
lazily in ``cached_property``s, closed when the task ends), the run's lease holder id, and the
translation of protocol outcomes into Airflow task states."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cached_property
from typing import Any

from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._protocol.ownership import airflow_holder
from airflow_samza_expand.airflow.hooks import DEFAULT_COORDINATOR, SamzaExpandKafkaHook
from airflow_samza_expand.core.errors import ExpansionError, LeaseHeldError, LeaseLostError
from airflow_samza_expand.store import CoordinatorStore

DEFAULT_CONN_ID = "kafka_default"
_CLIENTS = ("admin", "store")


@contextmanager
def protocol_outcomes() -> Iterator[None]:
    """Refusals (`ExpansionError`) fail the task without retry; another holder owning the
    expansion skips it (naming the holder); transient faults pass through (Airflow retries)."""
    try:
        yield
    except ExpansionError as exc:
        raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc
    except (LeaseHeldError, LeaseLostError) as exc:
        raise AirflowSkipException(
            f"another run owns this job's expansion, so this task changes nothing: {exc}"
        ) from exc


def holder_of(context: Mapping[str, Any] | None) -> str:
    """``airflow:<dag_id>/<run_id>``: the DAG run that owns what this task does."""
    ti = (context or {}).get("ti") or (context or {}).get("task_instance")
    run_id = getattr(ti, "run_id", None) or (context or {}).get("run_id") or "no-run"
    return airflow_holder(getattr(ti, "dag_id", None) or "no-dag", str(run_id))


class KafkaClients:
    """Mixin: ``hook``, ``admin`` and ``store`` of the task, built on first use and closed by
    `close_clients` (the task's ``finally``)."""

    kafka_config_id: str
    request_timeout_s: float
    job_name: str | None = None
    coordinator: str = DEFAULT_COORDINATOR

    @cached_property
    def hook(self) -> SamzaExpandKafkaHook:
        return SamzaExpandKafkaHook(kafka_config_id=self.kafka_config_id)

    @cached_property
    def kafka_config(self) -> dict[str, Any]:
        return self.hook.client_config()

    @cached_property
    def admin(self) -> KafkaAdmin:
        return self.hook.get_admin(self.kafka_config, timeout_s=self.request_timeout_s)

    @cached_property
    def store(self) -> CoordinatorStore:
        if not self.job_name:
            raise AirflowFailException("this task needs job_name to open the coordinator store")
        return self.hook.get_coordinator_store(self.job_name, self.coordinator, self.kafka_config)

    def close_clients(self) -> None:
        for name in (*_CLIENTS, "kafka_config"):
            client = self.__dict__.pop(name, None)
            close = getattr(client, "close", None)
            if close is not None:
                with contextlib.suppress(Exception):  # closing must not mask the outcome
                    close()


def as_bool(value: Any) -> bool:
    """A rendered template ("True", "false", "1") or a bool as a bool."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in {"1", "true", "yes", "on"}


def as_int(value: Any, name: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise AirflowFailException(f"{name} must be an integer, got {value!r}") from None


__all__ = [
    "DEFAULT_CONN_ID",
    "KafkaClients",
    "as_bool",
    "as_int",
    "holder_of",
    "protocol_outcomes",
]
