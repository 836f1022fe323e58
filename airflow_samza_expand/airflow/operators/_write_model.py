"""WriteJobModelOperator: job model vN+1 from the newest model and the live partition counts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from airflow.sdk import BaseOperator

from airflow_samza_expand._protocol.ownership import take
from airflow_samza_expand._protocol.steps import write_model as write_model_step
from airflow_samza_expand.airflow import _lineage
from airflow_samza_expand.airflow._shell import (
    DEFAULT_CONN_ID,
    KafkaClients,
    holder_of,
    protocol_outcomes,
)
from airflow_samza_expand.airflow.hooks import DEFAULT_COORDINATOR
from airflow_samza_expand.core.model import JobModel

NextModel = Callable[[JobModel, dict[str, int], str], JobModel]


class WriteJobModelOperator(_lineage.ReportsLineage, KafkaClients, BaseOperator):
    """Write job model vN+1: the newest model vN with the live partition counts, the new
    partitions mapped by the job's FixedTasks grouper (``core._plan``), so every key stays in the
    task that holds its state.

    * A rerun finds the vN+1 its expansion wrote in force: no-op.
    * A job model written by anyone else since vN (or since the plan ``expansion_id``):
      ``AirflowFailException`` naming that writer; their model stays in force.
    * Live counts equal to the newest model's: nothing to write, success.

    ``created_by`` defaults to the DAG run, ``airflow:<dag_id>/<run_id>``. ``next_model``
    (``(latest, live_counts, writer) -> JobModel``) replaces the grouper's mapping (the demo's
    naive negative control). Returns ``{job_name, version, written, counts, tasks, created_by}``.
    OpenLineage (`airflow._lineage`): the coordinator topic as output, the job model as a facet.
    """

    template_fields: Sequence[str] = ("job_name", "expansion_id", "coordinator", "created_by")
    ui_color = "#d9f2d0"

    def __init__(
        self,
        *,
        job_name: str,
        expansion_id: str | None = None,
        created_by: str | None = None,
        require_power_of_two: bool = True,
        next_model: NextModel | None = None,
        coordinator: str = DEFAULT_COORDINATOR,
        kafka_config_id: str = DEFAULT_CONN_ID,
        request_timeout_s: float = 30.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.job_name = job_name
        self.expansion_id = expansion_id
        self.created_by = created_by
        self.require_power_of_two = require_power_of_two
        self.next_model = next_model
        self.coordinator = coordinator
        self.kafka_config_id = kafka_config_id
        self.request_timeout_s = request_timeout_s

    def execute(self, context: Any) -> dict[str, Any]:
        holder = holder_of(context)
        try:
            with protocol_outcomes():
                lease = take(self.store, holder) if self.expansion_id else None
                result = write_model_step.write_job_model(
                    self.admin,
                    self.store,
                    self.created_by or holder,
                    expansion_id=self.expansion_id or None,
                    require_power_of_two=self.require_power_of_two,
                    lease=lease,
                    next_model=self.next_model,
                )
            store = _lineage.store_dataset(self.store, self.kafka_config)
            self.record_lineage(_lineage.write_step(store, result))
            return result
        finally:
            self.close_clients()
