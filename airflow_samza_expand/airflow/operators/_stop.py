"""StopStatefulJobOperator: ask the running job version to stop and wait until it has."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.configuration import conf
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from airflow_samza_expand._protocol import records
from airflow_samza_expand._protocol.ownership import take
from airflow_samza_expand._protocol.restart import RestartChoice
from airflow_samza_expand._protocol.steps import standby as standby_step
from airflow_samza_expand._protocol.steps import stop as stop_step
from airflow_samza_expand._protocol.steps.results import StopResult
from airflow_samza_expand.airflow._shell import (
    DEFAULT_CONN_ID,
    KafkaClients,
    holder_of,
    protocol_outcomes,
)
from airflow_samza_expand.airflow._waitlog import WaitLog
from airflow_samza_expand.airflow.hooks import DEFAULT_COORDINATOR
from airflow_samza_expand.airflow.triggers import JobStopTrigger

if TYPE_CHECKING:
    from airflow_samza_expand.store import CoordinatorStore, Lease


class StopTimeoutError(Exception):
    """Processors did not report stopped in time (retryable: they may still be finishing)."""


class StopStatefulJobOperator(KafkaClients, BaseOperator):
    """Write the ``stop`` control record for the job's running version (its newest job model)
    and wait until every processor of that version reports ``stopped`` (or ``failed``).

    The job finishes its micro-batch, commits its offsets and heartbeats ``stopped``. No
    processor active, or (with ``expansion_id``) the expansion's vN+1 already written: nothing
    to stop, success without a control record. Each poll logs which processors it still waits
    for. Not all stopped within ``stop_timeout_s``: a retryable error.

    ``standby_warm_timeout_s`` (the warm handover, with ``expansion_id``): first wait until the
    vN+1 standby is warm (`_protocol.steps.standby.standby_poll`), so that vN stops only when the
    switch is short; after that long without one, stop anyway (logged: the job is then down
    until the standby has started).

    ``deferrable`` (default: Airflow's ``[operators] default_deferrable``) hands both waits to
    the triggerer (`JobStopTrigger`), so they hold no worker slot; the outcome is the same.
    Returns ``{version, stopped: [processor ids], waited_s, requested, standby_waited_s}``.
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
        stop_timeout_s: float = stop_step.DEFAULT_STOP_TIMEOUT_S,
        standby_warm_timeout_s: float | None = None,
        request_timeout_s: float = 30.0,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
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
        self.standby_warm_timeout_s = standby_warm_timeout_s
        self.request_timeout_s = request_timeout_s
        self.deferrable = deferrable

    def execute(self, context: Any) -> dict[str, Any]:
        try:
            with protocol_outcomes():
                return self._stop(context)
        finally:
            self.close_clients()

    def execute_standby_warm(
        self, context: Any, event: dict[str, Any], started: float
    ) -> dict[str, Any]:
        """The deferred wait for a warm standby ended (warm, or timed out): stop now."""
        waited = round(time.time() - started, 3)
        try:
            with protocol_outcomes():
                self._check_event(event)
                if event.get("status") == "timeout":
                    self._standby_timed_out(event.get("waiting", ""), waited)
                else:
                    self.log.info("Standby warm %s: stopping the running version now.",
                                  event.get("warm"))  # fmt: skip
                store = self.store
                return self._request(context, store, self._lease(context, store), waited)
        finally:
            self.close_clients()

    def execute_stopped(
        self,
        context: Any,
        event: dict[str, Any],
        version: int | None,
        started: float,
        standby_waited: float | None = None,
    ) -> dict[str, Any]:
        """The deferred wait for the processors to stop ended: record it, or time out."""
        waited = time.time() - started
        try:
            with protocol_outcomes():
                self._check_event(event)
                if event.get("status") == "timeout":
                    raise StopTimeoutError(
                        f"after {waited:.0f} s, {event.get('waiting')} - check the job, then retry"
                    )
                result = StopResult(version, stopped=event.get("stopped", []),
                                    waited_s=round(waited, 3), requested=True,
                                    standby_waited_s=standby_waited)  # fmt: skip
                store = self.store
                return self._finish(store, self._lease(context, store), result)
        finally:
            self.close_clients()

    def _lease(self, context: Any, store: CoordinatorStore) -> Lease | None:
        return take(store, holder_of(context)) if self.expansion_id else None

    def _check_event(self, event: dict[str, Any]) -> None:
        if event.get("status") == "refused":
            raise AirflowFailException(event.get("error"))
        if event.get("status") == "lost":
            raise AirflowSkipException(f"another run owns this job's expansion: {event['error']}")

    def _defer(self, context: Any, wait: str, of_version: int, timeout_s: float, method: str,
               **kwargs: Any) -> None:  # fmt: skip
        """Defer to `JobStopTrigger` (`wait` on job model `of_version`); `method` resumes with
        the event, ``started`` (epoch seconds) and `kwargs`."""
        started = time.time()
        self.defer(
            trigger=JobStopTrigger(
                job_name=self.job_name,
                version=of_version,
                wait=wait,
                deadline=started + float(timeout_s),
                holder=holder_of(context) if self.expansion_id else None,
                poll_interval_s=self.poll_interval_s,
                coordinator=self.coordinator,
                kafka_config_id=self.kafka_config_id,
                request_timeout_s=self.request_timeout_s,
            ),
            method_name=method,
            kwargs={"started": started, **kwargs},
        )

    def _stop(self, context: Any) -> dict[str, Any]:
        store = self.store
        lease = self._lease(context, store)
        if self.expansion_id:  # the stop step starts here, before a wait for a warm standby
            stop_step.begin(store, self.expansion_id, lease)  # refused before acting
        if self.deferrable:
            version = self._standby_version(store)
            if version is not None:  # then standby_warm_timeout_s is set
                self._defer(context, "standby", version, float(self.standby_warm_timeout_s or 0),
                            "execute_standby_warm")  # fmt: skip
            return self._request(context, store, lease, None)
        return self._request(context, store, lease, self._wait_for_warm_standby(store))

    def _request(
        self,
        context: Any,
        store: CoordinatorStore,
        lease: Lease | None,
        standby_waited: float | None,
    ) -> dict[str, Any]:
        """Write the stop request, wait (or defer) until the processors stopped, record it."""
        decision = stop_step.request_stop(store, self.reason, expansion_id=self.expansion_id)
        self.log.info("%s.", decision.message)
        result = StopResult(decision.version, standby_waited_s=standby_waited)
        if decision.requested and self.deferrable:
            self._defer(context, "stop", decision.version, self.stop_timeout_s, "execute_stopped",
                        version=decision.version, standby_waited=standby_waited)  # fmt: skip
        if decision.requested:
            started = time.monotonic()
            waits = WaitLog(self.log)  # one line per change of what it waits for, not per poll
            while True:
                progress = stop_step.stop_poll(store, decision.version)
                waited = time.monotonic() - started
                waits.info(progress.message, f" ({waited:.1f} s since the stop request)")
                if progress.done:
                    result = dataclasses.replace(
                        result,
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
        return self._finish(store, lease, result)

    def _finish(
        self, store: CoordinatorStore, lease: Lease | None, result: StopResult
    ) -> dict[str, Any]:
        if self.expansion_id:
            stop_step.record_stopped(store, self.expansion_id, result, lease)
        return result.to_dict()

    def _standby_version(self, store: CoordinatorStore) -> int | None:
        """The vN+1 whose warm standby to wait for; None when not waiting (no warm handover,
        or vN+1 already written: a rerun)."""
        if self.standby_warm_timeout_s is None or not self.expansion_id:
            return None
        record = records.require(store, self.expansion_id)
        choice = RestartChoice.of_record(record)
        if choice is not None and not choice.strategy.launches_standby:
            return None  # the plan chose a restart without a standby
        version = record.target_version
        latest = store.latest_job_model()
        if latest is not None and latest.version >= version:
            return None
        return version

    def _standby_timed_out(self, message: str, waited: float) -> None:
        self.log.warning(
            "%s - none after %.0f s (standby_warm_timeout_s): stopping the running "
            "version anyway; the job is down until the standby has started (see its "
            "log in the submit_standby task's log_dir)",
            message,
            waited,
        )

    def _wait_for_warm_standby(self, store: CoordinatorStore) -> float | None:
        """Seconds waited for a warm vN+1 standby; None when not waiting."""
        version = self._standby_version(store)
        if version is None or self.standby_warm_timeout_s is None:
            return None
        started = time.monotonic()
        waits = WaitLog(self.log)  # one line per change of what it waits for, not per poll
        while True:
            progress = standby_step.standby_poll(store, version)
            waited = time.monotonic() - started
            if progress.done:
                self.log.info("%s: stopping the running version now.", progress.message)
                return round(waited, 3)
            if waited >= self.standby_warm_timeout_s:
                self._standby_timed_out(progress.message, waited)
                return round(waited, 3)
            waits.info(progress.message, f" ({waited:.1f} s so far)")
            time.sleep(min(self.poll_interval_s, 1.0))
