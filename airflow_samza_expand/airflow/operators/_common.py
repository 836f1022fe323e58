"""Shared pieces of the operators: error translation, identities, expansion records."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from airflow_samza_expand.core.errors import ExpansionError

DEFAULT_CONN_ID = "kafka_default"


@contextmanager
def refusals_fail_task() -> Iterator[None]:
    """Turn a refusal (`ExpansionError`) into `AirflowFailException`: a retry cannot fix it.

    Transient faults (``KafkaUnavailableError`` and anything else) pass through unchanged, so
    Airflow retries them.
    """
    try:
        yield
    except ExpansionError as exc:
        raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc


def utc_now_iso() -> str:
    """Now, ISO-8601 UTC with a Z, the timestamp format of coordinator records."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_iso(value: str) -> datetime:
    """Parse a coordinator timestamp (``...Z`` or with an offset) into an aware datetime."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def task_identity(context: Mapping[str, Any] | None) -> str:
    """``airflow:<dag_id>.<task_id>``: who writes a record, stable across retries and reruns."""
    ti = (context or {}).get("ti") or (context or {}).get("task_instance")
    dag_id = getattr(ti, "dag_id", None) or "no-dag"
    task_id = getattr(ti, "task_id", None) or "no-task"
    return f"airflow:{dag_id}.{task_id}"


def expansion_id_for(
    job_name: str, counts_before: Mapping[str, int], counts_after: Mapping[str, int]
) -> str:
    """Deterministic expansion id from the job and each grown stream's counts.

    ``orders-job~orders.4-8~payments.2-4``: a rerun of the same plan reuses the id (and so the
    record, including a barrier snapshot already taken).
    """
    parts = [_safe(job_name)]
    for stream in sorted(counts_after):
        parts.append(f"{_safe(stream)}.{counts_before[stream]}-{counts_after[stream]}")
    return "~".join(parts)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def update_expansion(store: Any, expansion_id: str, **changes: Any) -> dict[str, Any]:
    """Merge ``changes`` into the expansion record (created if missing) and write it back."""
    record = dict(store.get_expansion(expansion_id) or {"expansion_id": expansion_id})
    record.update(changes)
    record["updated_at"] = utc_now_iso()
    store.put_expansion(expansion_id, record)
    return record


def require_expansion(store: Any, expansion_id: str, job_name: str) -> dict[str, Any]:
    """The expansion record, or AirflowFailException saying how to create it."""
    record = store.get_expansion(expansion_id)
    if record is None:
        raise AirflowFailException(
            f"no expansion record {expansion_id!r} for job {job_name!r} in its coordinator store "
            "- run PlanExpansionOperator first and pass its expansion_id "
            "(e.g. \"{{ ti.xcom_pull('plan')['expansion_id'] }}\")"
        )
    return dict(record)


def close_quietly(*clients: Any) -> None:
    """Close admin clients / stores that have a close method, ignoring errors."""
    for client in clients:
        close = getattr(client, "close", None)
        if close is not None:
            with contextlib.suppress(Exception):  # closing must not mask the outcome
                close()
