"""ExpansionReportOperator: summarise the expansion, complete its record, release the lease."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from airflow_samza_expand._protocol.barrier.wait import order_verdict
from airflow_samza_expand._protocol.steps.report import (
    build_summary,
    finish,
    render_summary,
    start,
)
from airflow_samza_expand.airflow._order import check_setting, order_refusal
from airflow_samza_expand.airflow._shell import (
    DEFAULT_CONN_ID,
    KafkaClients,
    holder_of,
    protocol_outcomes,
)
from airflow_samza_expand.airflow.hooks import DEFAULT_COORDINATOR


class ExpansionReportOperator(KafkaClients, BaseOperator):
    """Summarise the expansion, log it and return it (XCom); mark the record ``completed`` and
    release the run's expansion lease (a run waiting for it then decides again).

    Summary: counts before/after, mapping diff (each new or moved SSP with its old and new
    task), barrier offsets, seconds per step (from the record's step times), job downtime
    (stop -> acknowledgement of the restarted job), run mode and submit handle. A dry run
    (nothing written) reports the plan only; a run whose plan was skipped (another run owned
    the expansion) is skipped too.

    Green means done: after completing the record the step checks that the cluster shows the
    outcome (every grown topic at its target, job model vN+1 the newest and what the live
    processors run, the record completed) and fails naming what is missing otherwise.

    The proof of order (docs/design.md 'Stale placements'): the summary's ``order`` (and the last
    log line) says ``order: proven ...`` or ``order: at risk ...``, from the restarted job's count
    and the step's own scan of the old partitions beyond the barrier. With
    ``on_stale_placement="fail"`` an order at risk fails
    the task (AirflowFailException naming the keys) after the record is completed.
    """

    template_fields: Sequence[str] = (
        "job_name",
        "expansion_id",
        "coordinator",
        "run_mode",
        "on_stale_placement",
    )
    ui_color = "#e0e0e0"

    def __init__(
        self,
        *,
        job_name: str,
        expansion_id: str,
        run_mode: str,
        task_ids: Mapping[str, str],
        coordinator: str = DEFAULT_COORDINATOR,
        kafka_config_id: str = DEFAULT_CONN_ID,
        request_timeout_s: float = 30.0,
        on_stale_placement: str = "warn",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.on_stale_placement = on_stale_placement
        self.job_name = job_name
        self.expansion_id = expansion_id
        self.run_mode = run_mode
        self.task_ids = dict(task_ids)
        self.coordinator = coordinator
        self.kafka_config_id = kafka_config_id
        self.request_timeout_s = request_timeout_s

    def execute(self, context: Any) -> dict[str, Any]:
        check_setting(self.on_stale_placement)  # rendered: a bad value fails before anything
        ti = context["ti"]
        index = getattr(ti, "map_index", -1)  # >= 0: one job of a mapped group (jobs="all")
        same = {"map_indexes": index} if isinstance(index, int) and index >= 0 else {}
        xcoms = {step: ti.xcom_pull(task_ids=t, **same) for step, t in self.task_ids.items()}
        if not xcoms.get("plan"):
            raise AirflowSkipException("the plan step did not plan an expansion: nothing to report")
        dry_run = bool(xcoms["plan"].get("dry_run")) or (
            xcoms.get("submit") is None and xcoms.get("write") is None
        )
        holder = holder_of(context)
        try:
            with protocol_outcomes():
                store = self.store
                record = (
                    None if xcoms["plan"].get("dry_run") else store.get_expansion(self.expansion_id)
                )
                if not dry_run and record is not None:  # the report step starts
                    record = start(store, record)
                history = [m.version for m in store.job_model_history()]
                summary = build_summary(
                    record, xcoms, run_mode=self.run_mode, history=history, dry_run=dry_run
                )
                if not dry_run and record is not None and record.barrier:
                    summary["order"] = order_verdict(self.admin, record)
                if not dry_run and record is not None:
                    times = {k: summary[k] for k in ("seconds_per_step", "downtime_s")}
                    # green means done: the grown topics, vN+1 newest and running, completed
                    finish(store, self.admin, self.expansion_id, times, holder)
        finally:
            self.close_clients()
        for line in render_summary(summary).splitlines():
            self.log.info("%s", line)
        refusal = order_refusal(summary.get("order"), self.on_stale_placement)
        if refusal is not None:  # the summary stays readable (XCom "summary") for the UI
            ti.xcom_push(key="summary", value=summary)
            raise AirflowFailException(f"order at risk: {refusal}")
        return summary
