"""The factory's steps: the Airflow layer's operators and sensors with what a DAG needs on top
(templated numbers from Params, resuming an interrupted expansion, step timestamps), plus the
available-now steps and the report."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from airflow_samza_expand.airflow.hooks import open_clients
from airflow_samza_expand.airflow.operators._common import (
    close_quietly,
    expansion_id_for,
    parse_iso,
    refusals_fail_task,
    update_expansion,
    utc_now_iso,
)
from airflow_samza_expand.airflow.operators.expand import ExpandPartitionsOperator
from airflow_samza_expand.airflow.operators.plan import PlanExpansionOperator
from airflow_samza_expand.airflow.operators.stop import StopStatefulJobOperator
from airflow_samza_expand.airflow.sensors import JobModelAckSensor, OrderingBarrierSensor
from airflow_samza_expand.airflow.waits import barrier_grace_until, barrier_poll
from airflow_samza_expand.dags import detached
from airflow_samza_expand.dags.submit import SubmitStreamJobOperator, normalise_run_mode

COMPLETED = "completed"
FRESH_HEARTBEAT_S = 60.0  # the job heartbeats at least every 10 s while it runs


def _fresh(heartbeat_at: Any) -> bool:
    """True for a heartbeat newer than FRESH_HEARTBEAT_S (a killed job leaves a stale one)."""
    if not heartbeat_at:
        return False
    try:
        age = time.time() - parse_iso(str(heartbeat_at)).timestamp()
    except ValueError:
        return False
    return age < FRESH_HEARTBEAT_S


def as_bool(value: Any) -> bool:
    """A rendered template ("True", "false", "1") or a bool as a bool."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in {"1", "true", "yes", "on"}


class ResumablePlanOperator(PlanExpansionOperator):
    """``PlanExpansionOperator`` that resumes an interrupted expansion.

    Once an expansion has written job model vN+1, planning "x2 of the current model" again would
    plan the *next* expansion. So when the newest job model was written by an expansion whose
    record is not ``completed`` (the report step completes it) and whose targets match this
    task's (``targets``, or ``topics`` x ``factor`` of the model before it), that expansion is
    returned (``reused: True``) and the rest of the DAG finishes it.
    """

    def __init__(self, *, follow_live_counts: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.follow_live_counts = follow_live_counts

    def _plan(self, config: Any, admin: Any, store: Any, writer: str) -> dict[str, Any]:
        if self.follow_live_counts and self.topics is not None:
            topics = [self.topics] if isinstance(self.topics, str) else list(self.topics)
            self.targets = admin.partition_counts(topics)  # UnknownTopicError names a bad one
            self.topics = None
            self.log.info("Following the live partition counts: targets %s.", self.targets)
        resumed = self._unfinished_expansion(store)
        if resumed is not None:
            return resumed
        return super()._plan(config, admin, store, writer)

    def _unfinished_expansion(self, store: Any) -> dict[str, Any] | None:
        latest = store.latest_job_model()
        if latest is None or latest.version < 2:
            return None
        previous = store.job_model(latest.version - 1)
        if previous is None:
            return None
        before_all, after_all = previous.partition_counts(), latest.partition_counts()
        grown = {s: n for s, n in after_all.items() if before_all.get(s) not in (None, n)}
        if not grown:
            return None
        before = {s: before_all[s] for s in grown}
        if self.targets is not None:
            wanted = {str(t): int(n) for t, n in dict(self.targets).items()}
        else:
            topics = [self.topics] if isinstance(self.topics, str) else list(self.topics or [])
            wanted = {t: before.get(t, 0) * int(self.factor) for t in topics}
        if wanted != grown:
            return None
        expansion_id = expansion_id_for(self.job_name, before, grown)
        record = store.get_expansion(expansion_id)
        if not record or record.get("status") == COMPLETED:
            return None
        if int(record.get("new_version", 0)) != latest.version or not record.get("plan"):
            return None
        self.log.info(
            "Job model v%d was written by expansion %s, which has not completed (status %s): "
            "resuming it instead of planning a new one.",
            latest.version,
            expansion_id,
            record.get("status"),
        )
        return {
            "expansion_id": expansion_id,
            "plan": record["plan"],
            "lag": record.get("lag_at_plan"),
            "conformance": record.get("conformance"),
            "reused": True,
        }


class ExpandStepOperator(ExpandPartitionsOperator):
    """``ExpandPartitionsOperator`` with a templated ``dry_run``: in a dry run the broker only
    validates the growth and the task ends *skipped*, so the steps that change the job skip too."""

    template_fields: Sequence[str] = (*ExpandPartitionsOperator.template_fields, "dry_run")

    def execute(self, context: Any) -> dict[str, Any]:
        self.dry_run = as_bool(self.dry_run)
        result = super().execute(context)
        if self.dry_run:
            context["ti"].xcom_push(key="dry_run", value=result)
            raise AirflowSkipException(
                f"dry run: growing {self.topic} from {result['partitions_before']} to "
                f"{result['partitions_after']} partitions validated, nothing changed"
            )
        return result


class BarrierStepSensor(OrderingBarrierSensor):
    """``OrderingBarrierSensor`` whose grace and timeout may come from Params (templated)."""

    template_fields: Sequence[str] = (
        *OrderingBarrierSensor.template_fields,
        "producer_refresh_grace_s",
        "barrier_timeout_s",
    )

    def _numbers(self) -> None:
        self.producer_refresh_grace_s = float(self.producer_refresh_grace_s)
        self.barrier_timeout_s = float(self.barrier_timeout_s)

    def execute(self, context: Any) -> Any:
        self._numbers()
        return super().execute(context)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        self._numbers()
        return super().execute_complete(context, event)


class BarrierSnapshotSensor(BarrierStepSensor):
    """Available-now mode: wait out the producer refresh grace and take the barrier snapshot
    (stored in the expansion record), without waiting for the job. The drain run that follows
    then reads at least up to the snapshot, and the barrier sensor after it finds it reached.
    Returns ``{expansion_id, barrier_offsets, total_lag}``. Pokes (use ``mode="reschedule"`` to
    free the worker slot during the grace)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs["deferrable"] = False
        super().__init__(**kwargs)

    def poke(self, context: Any) -> PokeReturnValue | bool:
        admin, store = self._clients(self.job_name, self.coordinator)
        with refusals_fail_task():
            if self._grace_until is None:
                self._grace_until = barrier_grace_until(
                    store, self.expansion_id, self.job_name, self.producer_refresh_grace_s
                )
            progress = barrier_poll(
                admin,
                store,
                expansion_id=self.expansion_id,
                job_name=self.job_name,
                group=self.group,
                grace_until=self._grace_until,
            )
        if progress.phase == "grace":
            self.log.info(
                "Waiting out the producer refresh grace of %s: %.0f s left.",
                self.expansion_id,
                progress.grace_left_s,
            )
            return False
        offsets = {t: {str(p): o for p, o in ps.items()} for t, ps in progress.barrier.items()}
        self.log.info(
            "Barrier snapshot of %s: %s (lag %d); the drain run reads up to it.",
            self.expansion_id,
            offsets,
            progress.total_lag,
        )
        return PokeReturnValue(
            True,
            {
                "expansion_id": self.expansion_id,
                "barrier_offsets": offsets,
                "total_lag": progress.total_lag,
            },
        )


class AckStepSensor(JobModelAckSensor):
    """``JobModelAckSensor`` that records ``acknowledged_at`` in the expansion record.

    ``accept_stopped`` (available-now mode): a processor that ran version N and ``stopped``
    cleanly also acknowledges it (the run has ended by the time this sensor runs); a ``failed``
    one fails the task. That check pokes (it needs no trigger)."""

    template_fields: Sequence[str] = (*JobModelAckSensor.template_fields, "expansion_id")

    def __init__(
        self, *, expansion_id: str | None = None, accept_stopped: bool = False, **kwargs: Any
    ) -> None:
        if accept_stopped:
            kwargs["deferrable"] = False
        super().__init__(**kwargs)
        self.expansion_id = expansion_id
        self.accept_stopped = accept_stopped

    def poke(self, context: Any) -> PokeReturnValue | bool:
        if not self.accept_stopped:
            return super().poke(context)
        _, store = self._clients(self.job_name, self.coordinator)
        with refusals_fail_task():
            processors = store.processors()
        mine = {p: s for p, s in processors.items() if s.get("job_model_version") == self._version}
        done = sorted(p for p, s in mine.items() if s.get("state") in ("running", "stopped"))
        failed = sorted(p for p, s in mine.items() if s.get("state") == "failed")
        if failed and not done:
            raise AirflowFailException(
                f"processors {failed} of job {self.job_name!r} failed on job model "
                f"v{self._version} - read the Spark log of the submit step, fix, clear the task"
            )
        if len(done) >= self.min_processors:
            states = {p: mine[p].get("state") for p in done}
            self.log.info("Job %s ran job model v%d: %s", self.job_name, self._version, states)
            return PokeReturnValue(True, {"version": self._version, "running": done, "others": {}})
        self.log.info(
            "Waiting for a processor of %s to run job model v%d (seen: %s).",
            self.job_name,
            self._version,
            {p: s.get("state") for p, s in mine.items()} or "none",
        )
        return False

    def _record(self, result: Any) -> Any:
        if self.expansion_id and result is not None:
            _, store = open_clients(self.kafka_config_id, self.job_name, self.coordinator)
            try:
                update_expansion(store, str(self.expansion_id), acknowledged_at=utc_now_iso())
            finally:
                close_quietly(store)
        return result

    def execute(self, context: Any) -> Any:
        return self._record(super().execute(context))

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        return self._record(super().execute_complete(context, event))


class SubmitStepOperator(SubmitStreamJobOperator):
    """`SubmitStreamJobOperator` that writes ``submitted_at`` and its handle into the record."""

    template_fields: Sequence[str] = (
        *SubmitStreamJobOperator.template_fields,
        "job_name",
        "expansion_id",
        "coordinator",
    )

    def __init__(
        self,
        *,
        job_name: str,
        expansion_id: str,
        coordinator: str,
        kafka_config_id: str,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.job_name = job_name
        self.expansion_id = expansion_id
        self.coordinator = coordinator
        self.kafka_config_id = kafka_config_id

    def execute(self, context: Any) -> dict[str, Any]:
        _, store = open_clients(self.kafka_config_id, self.job_name, self.coordinator)
        try:
            with refusals_fail_task():
                latest = store.latest_job_model()
                version = latest.version if latest is not None else None
                running = sorted(
                    pid
                    for pid, p in store.processors().items()
                    if p.get("job_model_version") == version
                    and p.get("state") in ("starting", "running")
                    and _fresh(p.get("heartbeat_at"))
                )
                earlier = (store.get_expansion(self.expansion_id) or {}).get("submit") or {}
                if earlier.get("detached") and detached.is_running(earlier):
                    running.append(f"pid {earlier['pid']} (launched by an earlier run)")
                if running and normalise_run_mode(self.run_mode) == "continuous":
                    self.log.info(
                        "Job %s already runs job model v%s (%s): not launching it twice.",
                        self.job_name,
                        version,
                        ", ".join(running),
                    )
                    return {"mode": "continuous", "already_running": running, **earlier}
                stop = store.stop_request()
                if stop and version is not None and int(stop.get("version", 0)) >= version:
                    # A stop for the version we start (left by an earlier stop of a rerun)
                    # would stop the restarted job at once; the job it meant has stopped.
                    self.log.info("Clearing the stop request %s before the launch.", stop)
                    store.clear_stop()
            result = super().execute(context)
            update_expansion(store, self.expansion_id, submitted_at=utc_now_iso(), submit=result)
        finally:
            close_quietly(store)
        return result


class StopStepOperator(StopStatefulJobOperator):
    """``StopStatefulJobOperator`` that, on a rerun after job model vN+1 was written, stops
    nothing: the job that had to stop (on vN) stopped before vN+1 could be written, and a job
    running vN+1 is the restarted one."""

    def execute(self, context: Any) -> dict[str, Any]:
        if self.expansion_id:
            _, store = open_clients(self.kafka_config_id, self.job_name, self.coordinator)
            try:
                with refusals_fail_task():
                    record = store.get_expansion(self.expansion_id) or {}
                    latest = store.latest_job_model()
            finally:
                close_quietly(store)
            new_version = int(record.get("new_version") or 0)
            if latest is not None and new_version and latest.version >= new_version:
                self.log.info(
                    "Job model v%d of expansion %s is already written: nothing to stop.",
                    latest.version,
                    self.expansion_id,
                )
                return {"version": None, "stopped": [], "waited_s": 0.0, "requested": False}
        return super().execute(context)


class ExpansionReportOperator(BaseOperator):
    """Summarise the expansion, log it and return it (XCom); marks the record ``completed``.

    Summary: counts before/after, mapping diff (each new or moved SSP with its old and new
    task), barrier offsets, seconds per step (from the expansion record's timestamps), job
    downtime (stop -> acknowledgement of the restarted job), run mode and submit handle.
    A dry run (expand skipped) reports the plan only and completes nothing.
    """

    template_fields: Sequence[str] = ("job_name", "expansion_id", "coordinator", "run_mode")
    ui_color = "#e0e0e0"

    def __init__(
        self,
        *,
        job_name: str,
        expansion_id: str,
        run_mode: str,
        task_ids: Mapping[str, str],
        coordinator: str,
        kafka_config_id: str,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.job_name = job_name
        self.expansion_id = expansion_id
        self.run_mode = run_mode
        self.task_ids = dict(task_ids)
        self.coordinator = coordinator
        self.kafka_config_id = kafka_config_id

    def execute(self, context: Any) -> dict[str, Any]:
        from airflow_samza_expand.dags.report import build_summary, render_summary

        ti = context["ti"]
        xcoms = {step: ti.xcom_pull(task_ids=task_id) for step, task_id in self.task_ids.items()}
        _, store = open_clients(self.kafka_config_id, self.job_name, self.coordinator)
        try:
            with refusals_fail_task():
                record = store.get_expansion(self.expansion_id) or {}
                history = [m.version for m in store.job_model_history()]
                dry_run = xcoms.get("submit") is None and xcoms.get("write") is None
                summary = build_summary(
                    record, xcoms, run_mode=self.run_mode, history=history, dry_run=dry_run
                )
                if not dry_run:
                    update_expansion(
                        store,
                        self.expansion_id,
                        status=COMPLETED,
                        completed_at=utc_now_iso(),
                        summary={k: summary[k] for k in ("seconds_per_step", "downtime_s")},
                    )
        finally:
            close_quietly(store)
        for line in render_summary(summary).splitlines():
            self.log.info("%s", line)
        return summary
