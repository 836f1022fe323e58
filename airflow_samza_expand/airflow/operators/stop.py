"""StopStatefulJobOperator: ask the running job version to stop and wait until it has."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from airflow_samza_expand.airflow.hooks import DEFAULT_COORDINATOR
from airflow_samza_expand.airflow.shell import (
    DEFAULT_CONN_ID,
    KafkaClients,
    holder_of,
    protocol_outcomes,
)
from airflow_samza_expand.protocol import restart, waits
from airflow_samza_expand.protocol.ownership import take


class StopTimeoutError(Exception):
    """Processors did not report stopped in time (retryable: they may still be finishing)."""


class StopStatefulJobOperator(KafkaClients, BaseOperator):
    """Write the ``stop`` control record for the job's running version (its newest job model)
    and wait until every processor of that version reports ``stopped`` (or ``failed``).

    The job finishes its micro-batch, commits its offsets and heartbeats ``stopped``. No
    processor active, or (with ``expansion_id``) the expansion's vN+1 already written: nothing
    to stop, success without a control record. Each poll logs which processors it still waits
    for. Not all stopped within ``stop_timeout_s``: a retryable error.
    Returns ``{version, stopped: [processor ids], waited_s, requested}``.
    """

    template_fields: Sequence[str] = ("job_name", "reason", "expansion_id", "coordinator")
    ui_color = "#ffd9c9"

    def __init__(
        self,
        *,
        job_name: str,
        reason: str = "partition expansion",
        expansion_id: str | None = None,
        coordinator: str = DEFAULT_COORDINATOR,
        kafka_config_id: str = DEFAULT_CONN_ID,
        poll_interval_s: float = 5.0,
        stop_timeout_s: float = 600.0,
        request_timeout_s: float = 30.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.job_name = job_name
        self.reason = reason
        self.expansion_id = expansion_id
        self.coordinator = coordinator
        self.kafka_config_id = kafka_config_id
        self.poll_interval_s = poll_interval_s
        self.stop_timeout_s = stop_timeout_s
        self.request_timeout_s = request_timeout_s

    def execute(self, context: Any) -> dict[str, Any]:
        try:
            with protocol_outcomes():
                return self._stop(context)
        finally:
            self.close_clients()

    def _stop(self, context: Any) -> dict[str, Any]:
        store = self.store
        lease = take(store, holder_of(context)) if self.expansion_id else None
        decision = restart.request_stop(store, self.reason, expansion_id=self.expansion_id)
        self.log.info("%s.", decision.message)
        result: dict[str, Any] = {
            "version": decision.version,
            "stopped": [],
            "waited_s": 0.0,
            "requested": False,
        }
        if decision.requested:
            started = time.monotonic()
            while True:
                progress = waits.stop_poll(store, decision.version)
                waited = time.monotonic() - started
                self.log.info("%s (%.0f s so far).", progress.message, waited)
                if progress.done:
                    result.update(
                        stopped=progress.result["stopped"],
                        waited_s=round(waited, 3),
                        requested=True,
                    )
                    break
                if waited >= self.stop_timeout_s:
                    raise StopTimeoutError(
                        f"after {waited:.0f} s, {progress.message} - check the job, then retry"
                    )
                time.sleep(self.poll_interval_s)
        if self.expansion_id:
            restart.record_stopped(store, self.expansion_id, result, lease)
        return result
