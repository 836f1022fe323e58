"""WriteJobModelOperator: job model vN+1 from the newest model and the live partition counts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_samza_expand.airflow.hooks import DEFAULT_COORDINATOR, open_clients
from airflow_samza_expand.airflow.operators._common import (
    DEFAULT_CONN_ID,
    close_quietly,
    refusals_fail_task,
    require_expansion,
    task_identity,
    update_expansion,
    utc_now_iso,
)
from airflow_samza_expand.core.errors import ConcurrentExpansionError, InvalidGrowthError
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.core.plan import plan_expansion


class WriteJobModelOperator(BaseOperator):
    """Write job model vN+1: the newest model vN with the live partition counts, the new
    partitions mapped by the job's FixedTasks grouper (``core.plan``), so every key stays in the
    task that holds its state.

    * A rerun finds its own vN+1 in force (same content, same writer): no-op.
    * A job model written by anyone else since vN (or since the plan ``expansion_id``):
      ``AirflowFailException`` naming that writer; their model stays in force.
    * Live counts equal to the newest model's: nothing to write, success.

    ``created_by`` defaults to ``airflow:<dag_id>.<task_id>``. Returns
    ``{job_name, version, written, counts, tasks, created_by}``.
    """

    template_fields: Sequence[str] = ("job_name", "expansion_id", "coordinator", "created_by")
    ui_color = "#d9f2d0"

    def __init__(
        self,
        *,
        job_name: str,
        expansion_id: str | None = None,
        created_by: str | None = None,
        coordinator: str = DEFAULT_COORDINATOR,
        kafka_config_id: str = DEFAULT_CONN_ID,
        require_power_of_two: bool = True,
        request_timeout_s: float = 30.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.job_name = job_name
        self.expansion_id = expansion_id
        self.created_by = created_by
        self.coordinator = coordinator
        self.kafka_config_id = kafka_config_id
        self.require_power_of_two = require_power_of_two
        self.request_timeout_s = request_timeout_s

    def execute(self, context: Any) -> dict[str, Any]:
        writer = self.created_by or task_identity(context)
        admin, store = open_clients(
            self.kafka_config_id, self.job_name, self.coordinator, timeout_s=self.request_timeout_s
        )
        try:
            with refusals_fail_task():
                return self._write(admin, store, writer)
        finally:
            close_quietly(admin, store)

    def _write(self, admin: Any, store: Any, writer: str) -> dict[str, Any]:
        latest = store.latest_job_model()
        if latest is None:
            raise AirflowFailException(
                f"job {self.job_name!r} has no job model in its coordinator store "
                f"({self.coordinator}) - the job writes v1 when it first starts"
            )
        record = (
            require_expansion(store, self.expansion_id, self.job_name)
            if self.expansion_id
            else None
        )
        if record is not None and latest.version != int(record["old_version"]):
            return self._already_written(latest, record, writer)

        live = admin.partition_counts(sorted(latest.partition_counts()))
        targets = {s: n for s, n in live.items() if n != latest.partition_counts()[s]}
        if record is not None:
            planned = {s: int(n) for s, n in record["counts_after"].items()}
            grown = {s: n for s, n in planned.items() if n != int(record["counts_before"][s])}
            if targets != grown:
                raise InvalidGrowthError(
                    f"live partition counts {live} do not match expansion {self.expansion_id!r} "
                    f"(planned {planned}) - run ExpandPartitionsOperator first"
                )
        if not targets:
            self.log.info(
                "Job model v%d of %s (by %s) already matches the live counts %s: nothing to write.",
                latest.version,
                self.job_name,
                latest.created_by,
                live,
            )
            return _result(latest, written=False)

        plan = plan_expansion(
            latest,
            live,
            targets,
            require_power_of_two=self.require_power_of_two,
            created_by=writer,
        )
        self.log.info(
            "Writing job model v%d of %s: counts %s -> %s, %d tasks, %d SSPs moved.",
            plan.new_version,
            self.job_name,
            dict(plan.counts_before),
            dict(plan.counts_after),
            len(plan.new_job_model.tasks()),
            len(plan.moved),
        )
        try:
            written = store.write_job_model(plan.new_job_model)
        except ConcurrentExpansionError as exc:
            winner = store.latest_job_model()
            raise AirflowFailException(
                f"ConcurrentExpansionError: job model v{plan.new_version} of {self.job_name!r} "
                f"was written by {_writer(winner)} while this task ({writer}) wrote it; theirs "
                f"stays in force - inspect that expansion before retrying ({exc})"
            ) from exc
        if written.created_by != writer:
            raise AirflowFailException(
                f"ConcurrentExpansionError: job model v{written.version} of {self.job_name!r} "
                f"was written by {_writer(written)} at the same time as this task ({writer}); "
                "theirs stays in force - inspect that expansion before retrying"
            )
        if self.expansion_id:
            update_expansion(
                store,
                self.expansion_id,
                status="job-model-written",
                job_model_version=written.version,
                job_model_written_at=utc_now_iso(),
            )
        return _result(written, written=True)

    def _already_written(
        self, latest: JobModel, record: dict[str, Any], writer: str
    ) -> dict[str, Any]:
        """The newest model is past the plan's base: our own vN+1 (no-op) or someone else's."""
        base = int(record["old_version"])
        planned = {s: int(n) for s, n in record["counts_after"].items()}
        ours = (
            latest.version == base + 1
            and latest.created_by == writer
            and latest.partition_counts() == planned
        )
        if not ours:
            raise AirflowFailException(
                f"ConcurrentExpansionError: expansion {self.expansion_id!r} was planned on job "
                f"model v{base} of {self.job_name!r}, but v{latest.version} is now in force, "
                f"written by {_writer(latest)} - someone else expanded the job; plan again"
            )
        self.log.info(
            "Job model v%d of %s is already written by this task (%s): nothing to do.",
            latest.version,
            self.job_name,
            writer,
        )
        return _result(latest, written=False)


def _writer(model: JobModel | None) -> str:
    if model is None:
        return "an unknown writer"
    return f"{model.created_by!r} (v{model.version}, at {model.created_at})"


def _result(model: JobModel, *, written: bool) -> dict[str, Any]:
    return {
        "job_name": model.job_name,
        "version": model.version,
        "written": written,
        "counts": model.partition_counts(),
        "tasks": len(model.tasks()),
        "created_by": model.created_by,
    }
