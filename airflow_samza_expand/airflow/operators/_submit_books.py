"""The submit step's expansion bookkeeping (``_protocol.steps.submit``) for the submit operator
and the restart gate: decide from the record and the heartbeats whether to launch, note the
launch in the record before anything starts (``_protocol.job.launches``: a retry on any worker reads
it), record the redacted handle. Each access rides out a short coordinator-store outage."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from airflow_samza_expand._kafka.errors import KafkaUnavailableError
from airflow_samza_expand._protocol.job import launches
from airflow_samza_expand._protocol.ownership import take
from airflow_samza_expand._protocol.steps import submit as submit_step
from airflow_samza_expand.airflow import _lineage
from airflow_samza_expand.airflow._shell import KafkaClients, holder_of, protocol_outcomes

log = logging.getLogger(__name__)
T = TypeVar("T")
STORE_OUTAGE_S = 120.0  # how long the step rides out an unreachable coordinator store
STORE_RETRY_S = 2.0


class SubmitBooks(KafkaClients):
    """The submit step's expansion bookkeeping: launch once, note the launch, record the
    redacted handle."""

    request_timeout_s = 30.0

    def __init__(
        self, job_name: str | None, expansion_id: str | None, coordinator: str, conn_id: str
    ) -> None:
        self.job_name = job_name
        self.expansion_id = expansion_id
        self.coordinator = coordinator
        self.kafka_config_id = conn_id
        self.lineage = _lineage.StepLineage()  # the job's input topics, once `before` read them
        self.version: int | None = None  # the job model the launch starts (`before`)

    def before(self, context: Any, mode: str) -> dict[str, Any] | None:
        if not self.job_name:
            return None

        def decide() -> Any:
            decision = submit_step.before_submit(
                self.store,
                self.expansion_id or None,
                continuous=mode == "continuous",
            )
            self.lineage = _lineage.submit_step(self.store, self.kafka_config)
            return decision

        decision = self._asking_again(decide, "read the job's processors before launching")
        self.version = decision.version
        if decision.launch:
            return None
        return {"already_running": decision.running, "reason": decision.message,
                **decision.earlier}  # fmt: skip

    def note_launch(self, context: Any, facts: Mapping[str, Any]) -> dict[str, Any]:
        """Note (or complete) the launch ``facts`` in the record; the facts as stored."""
        if not (self.job_name and self.expansion_id):
            return dict(facts)
        eid = self.expansion_id

        def note() -> dict[str, Any]:
            return launches.note(self.store, eid, facts, take(self.store, holder_of(context)))

        return self._asking_again(note, "note the launch in the expansion record")

    def new_launch(
        self, context: Any, application: str | None, window_s: float, **known: Any
    ) -> dict:
        """The facts of the launch about to start (with ``known`` ones: its log path), noted
        in the record before it starts."""
        record = None
        if self.job_name and self.expansion_id:
            eid = self.expansion_id
            record = self._asking_again(lambda: self.store.get_expansion(eid), "read the record")
        facts = launches.new_facts(record, application=application, window_s=window_s)
        return self.note_launch(context, {**facts, **{k: v for k, v in known.items() if v}})

    def processors_up(self) -> list[str]:
        """Live processors of the launched job model (one look; none without books)."""
        if not self.job_name or self.version is None:
            return []
        version = self.version
        return self._asking_again(
            lambda: launches.live_of(self.store.processors(), version), "read the processors"
        )

    def after(self, context: Any, result: dict[str, Any]) -> None:
        if not (self.job_name and self.expansion_id):
            return

        def record() -> None:
            lease = take(self.store, holder_of(context))
            submit_step.record_submitted(self.store, self.expansion_id, result, lease)

        self._asking_again(record, "record the launch in the expansion record")

    def _asking_again(self, step: Callable[[], T], what: str) -> T:
        """``step()`` on fresh clients; while the broker cannot serve the coordinator store (a
        restart, a leader election: `KafkaUnavailableError`) it is asked again for up to
        `STORE_OUTAGE_S`. Each attempt is idempotent, so the step rides such an outage out
        rather than fail a task whose retry would first wait for the launch's window."""
        deadline = time.monotonic() + STORE_OUTAGE_S
        while True:
            try:
                with protocol_outcomes():
                    return step()
            except KafkaUnavailableError as exc:
                if time.monotonic() >= deadline:
                    raise
                log.warning(
                    "could not %s - the coordinator store is unreachable for now (%s); asking "
                    "again in %.0f s (up to %.0f s in all)",
                    what, exc, STORE_RETRY_S, STORE_OUTAGE_S,
                )  # fmt: skip
                time.sleep(STORE_RETRY_S)
            finally:
                self.close_clients()  # a broken connection is not reused: the next try reconnects


__all__ = ["STORE_OUTAGE_S", "STORE_RETRY_S", "SubmitBooks"]
