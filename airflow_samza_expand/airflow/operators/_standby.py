"""LaunchStandbyOperator: start standby processor(s) of the expansion's job model vN+1
(`_protocol.steps.standby`): the handover's standby, launched during the producer grace while vN
still runs, or a hot standby kept for failover after the restart."""

from __future__ import annotations

from typing import Any

from airflow_samza_expand._protocol import records, restart
from airflow_samza_expand._protocol.ownership import take
from airflow_samza_expand._protocol.steps import standby as standby_step
from airflow_samza_expand.airflow import _lineage
from airflow_samza_expand.airflow._shell import holder_of, protocol_outcomes
from airflow_samza_expand.airflow.hooks import DEFAULT_COORDINATOR
from airflow_samza_expand.airflow.operators._submit import SubmitStreamJobOperator
from airflow_samza_expand.airflow.operators._submit_books import SubmitBooks


class LaunchStandbyOperator(SubmitStreamJobOperator):
    """`SubmitStreamJobOperator` (continuous, detached) that launches the job with ``--standby
    --job-model-version <vN+1>`` until ``processors`` processors of vN+1 exist (live ones and
    the launch an earlier try on any worker noted in the record, while it may still come up,
    count: a retry launches nothing twice).

    A standby warms Spark up, waits for the job's active lease and, holding it, for job model
    vN+1 to be written; it never processes an older one. ``step`` names its entry in the
    expansion record (``standby``: the handover's; ``hot_standby``). Returns ``{version,
    launched, live, launches: [handles]}``. OpenLineage: the job's input topics as inputs.
    """

    ui_color = "#fff2cc"

    def __init__(
        self,
        *,
        job_name: str,
        expansion_id: str,
        processors: int = 1,
        step: str = "standby",
        coordinator: str = DEFAULT_COORDINATOR,
        kafka_config_id: str = "kafka_default",
        **kwargs: Any,
    ) -> None:
        kwargs.pop("run_mode", None)
        super().__init__(
            run_mode="continuous",
            job_name=job_name,
            expansion_id=expansion_id,
            coordinator=coordinator,
            kafka_config_id=kafka_config_id,
            **kwargs,
        )
        if step not in restart.LAUNCH_STEPS:
            raise ValueError(f"step={step!r}: use one of {restart.LAUNCH_STEPS}")
        self.processors = processors
        self.step = step

    def execute(self, context: Any) -> dict[str, Any]:
        books = self._books = _StandbyBooks(
            self.job_name, self.expansion_id, self.coordinator, self.kafka_config_id
        )
        books.step = self.step
        try:
            with protocol_outcomes():
                decision = standby_step.before_standby(
                    books.store, str(self.expansion_id), processors=int(self.processors),
                    step=self.step,
                )  # fmt: skip
            self.log.info("%s.", decision.message)
            books.decided(decision.version, decision.live)
            if decision.launch:  # the step's start: its launches take the startup check's time
                with protocol_outcomes():
                    records.begin(books.store, str(self.expansion_id), self.step)
            base_args = list(self.application_args or [])
            launches: list[dict[str, Any]] = []
            for _ in range(decision.launch):
                self.application_args = standby_step.standby_args(base_args, decision.version)
                launches.append(super().execute(context))  # noted in the record before it starts
                self.log.info(
                    "Standby of job model v%d launched: it warms up and waits for the active "
                    "lease.",
                    decision.version,
                )
            self.application_args = base_args
            self.record_lineage(_lineage.submit_step(books.store, books.kafka_config))
            if launches:
                with protocol_outcomes():
                    lease = take(books.store, holder_of(context))
                    standby_step.record_launches(
                        books.store, str(self.expansion_id), self.step, launches, lease
                    )
        finally:
            books.close_clients()
        return {
            "version": decision.version,
            "launched": len(launches),
            "live": decision.live,
            "launches": launches,
        }

    def expansion_books(self) -> _StandbyBooks:
        """This try's books (made by `execute`): each launch noted with its step."""
        return self._books


class _StandbyBooks(SubmitBooks):
    """The standby step's books: it decides itself (`before_standby`) and keeps its own
    result; each launch is noted in the record before it starts, as the submit's is, with
    its step and the processors of vN+1 already alive (`_protocol.job.launches`)."""

    step = "standby"
    live: tuple[str, ...] = ()

    def decided(self, version: int, live: list[str]) -> None:
        self.version, self.live = version, tuple(live)

    def before(self, context: Any, mode: str) -> None:
        return None  # decided by the standby step

    def after(self, context: Any, result: dict[str, Any]) -> None:
        return None  # the standby step records its launches itself

    def new_launch(
        self, context: Any, application: str | None, window_s: float, **known: Any
    ) -> dict:
        return super().new_launch(
            context, application, window_s, **known, step=self.step, live_before=list(self.live)
        )


__all__ = ["LaunchStandbyOperator"]
