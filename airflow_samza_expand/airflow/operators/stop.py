"""StopStatefulJobOperator: ask the running job version to stop and wait until it has."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator

from airflow_samza_expand.airflow.hooks import DEFAULT_COORDINATOR, open_clients
from airflow_samza_expand.airflow.operators._common import (
    DEFAULT_CONN_ID,
    close_quietly,
    refusals_fail_task,
    update_expansion,
    utc_now_iso,
)

ACTIVE_STATES = frozenset({"starting", "running", "stopping"})
DONE_STATES = frozenset({"stopped", "failed"})


class StopTimeoutError(Exception):
    """Processors did not report stopped in time (retryable: they may still be finishing)."""


class StopStatefulJobOperator(BaseOperator):
    """Write the ``stop`` control record for the job's running version (its newest job model)
    and wait until every processor of that version reports ``stopped`` (or ``failed``).

    The job finishes its micro-batch, commits its offsets and heartbeats ``stopped``. No
    processor active: nothing to stop, success without a control record. Each poll logs which
    processors it still waits for. Not all stopped within ``stop_timeout_s``: a retryable error.
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
        admin, store = open_clients(
            self.kafka_config_id, self.job_name, self.coordinator, timeout_s=self.request_timeout_s
        )
        try:
            with refusals_fail_task():
                return self._stop(store)
        finally:
            close_quietly(admin, store)

    def _stop(self, store: Any) -> dict[str, Any]:
        model = store.latest_job_model()
        version = model.version if model is not None else None
        active = _active(store.processors(), version)
        if not active:
            self.log.info(
                "No processor of job %s runs job model v%s: nothing to stop.",
                self.job_name,
                version,
            )
            return {"version": version, "stopped": [], "waited_s": 0.0, "requested": False}

        existing = store.stop_request()
        if not existing or existing.get("version") != version:
            store.request_stop(version, self.reason)
            self.log.info(
                "Requested stop of job %s v%s (%s); processors: %s.",
                self.job_name,
                version,
                self.reason,
                ", ".join(sorted(active)),
            )
        else:
            self.log.info(
                "Stop of job %s v%s already requested at %s.",
                self.job_name,
                version,
                existing.get("requested_at"),
            )

        started = time.monotonic()
        while True:
            processors = store.processors()
            waiting = _active(processors, version)
            waited = time.monotonic() - started
            if not waiting:
                stopped = sorted(
                    pid for pid, p in processors.items() if p.get("job_model_version") == version
                )
                self.log.info(
                    "All processors of job %s v%s stopped after %.1f s: %s.",
                    self.job_name,
                    version,
                    waited,
                    ", ".join(stopped),
                )
                if self.expansion_id:
                    update_expansion(store, self.expansion_id, job_stopped_at=utc_now_iso())
                return {
                    "version": version,
                    "stopped": stopped,
                    "waited_s": round(waited, 3),
                    "requested": True,
                }
            if waited >= self.stop_timeout_s:
                raise StopTimeoutError(
                    f"after {waited:.0f} s, processors of job {self.job_name!r} v{version} still "
                    f"have not stopped: {_describe(waiting)} - check the job, then retry"
                )
            self.log.info(
                "Waiting for %d processor(s) of job %s v%s to stop (%.0f s so far): %s.",
                len(waiting),
                self.job_name,
                version,
                waited,
                _describe(waiting),
            )
            time.sleep(self.poll_interval_s)


def _active(
    processors: Mapping[str, Mapping[str, Any]], version: int | None
) -> dict[str, Mapping[str, Any]]:
    """Processors of ``version`` that have not stopped."""
    return {
        pid: p
        for pid, p in processors.items()
        if p.get("job_model_version") == version and p.get("state") in ACTIVE_STATES
    }


def _describe(processors: Mapping[str, Mapping[str, Any]]) -> str:
    return ", ".join(
        f"{pid} ({p.get('state')}, heartbeat {p.get('heartbeat_at')})"
        for pid, p in sorted(processors.items())
    )
