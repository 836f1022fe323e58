"""ExpandPartitionsOperator: grow one topic by a power of two, at most once per expansion."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowSkipException

from airflow_samza_expand._protocol.ownership import take
from airflow_samza_expand._protocol.steps.expand import ExpandRequest, expand
from airflow_samza_expand.airflow import _lineage
from airflow_samza_expand.airflow._shell import (
    DEFAULT_CONN_ID,
    KafkaClients,
    as_bool,
    as_int,
    holder_of,
    protocol_outcomes,
)
from airflow_samza_expand.airflow.hooks import DEFAULT_COORDINATOR


class ExpandPartitionsOperator(_lineage.ReportsLineage, KafkaClients, BaseOperator):
    """Grow ``topic`` to ``target_partitions`` (or its baseline count times ``factor``).

    * Already at the target, or already grown by this expansion: success, nothing changed (a
      rerun after success is a no-op; a topic is never grown twice for one expansion).
    * At the baseline: CreatePartitions; if that times out, the count is re-read - the growth
      may have been applied - before the task fails for a retry.
    * At any other count, a shrink, or (``require_power_of_two``) a non power-of-two growth:
      ``AirflowFailException``, nothing changed.

    The baseline comes from the expansion record (``expansion_id``; the step then holds the
    run's expansion lease), else the job's newest job model (``job_name``), else the live count.
    ``dry_run`` (templated) asks the broker to validate the growth without applying it; with
    ``skip_on_dry_run`` the task then ends *skipped* (its result in XCom ``dry_run``), so the
    steps that change the job skip too. Returns
    ``{topic, partitions_before, partitions_after, changed, dry_run, expansion_id}``.
    OpenLineage (`airflow._lineage`): the topic as input and output, with its counts as a facet.
    """

    template_fields: Sequence[str] = (
        "topic",
        "factor",
        "target_partitions",
        "job_name",
        "expansion_id",
        "coordinator",
        "dry_run",
    )
    ui_color = "#c9e4ff"

    def __init__(
        self,
        *,
        topic: str,
        factor: int | str | None = None,
        target_partitions: int | str | None = None,
        require_power_of_two: bool = True,
        dry_run: bool | str = False,
        skip_on_dry_run: bool = False,
        job_name: str | None = None,
        expansion_id: str | None = None,
        coordinator: str = DEFAULT_COORDINATOR,
        kafka_config_id: str = DEFAULT_CONN_ID,
        request_timeout_s: float = 30.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if (factor is None) == (target_partitions is None):
            raise ValueError(
                f"{self.task_id}: pass exactly one of factor=2 or target_partitions=<count> "
                f"(got factor={factor!r}, target_partitions={target_partitions!r})"
            )
        if expansion_id is not None and job_name is None:
            raise ValueError(f"{self.task_id}: expansion_id needs job_name (whose store holds it)")
        self.topic = topic
        self.factor = factor
        self.target_partitions = target_partitions
        self.require_power_of_two = require_power_of_two
        self.dry_run = dry_run
        self.skip_on_dry_run = skip_on_dry_run
        self.job_name = job_name
        self.expansion_id = expansion_id
        self.coordinator = coordinator
        self.kafka_config_id = kafka_config_id
        self.request_timeout_s = request_timeout_s

    def execute(self, context: Any) -> dict[str, Any]:
        dry_run = as_bool(self.dry_run)
        request = ExpandRequest(
            topic=self.topic,
            target=None
            if self.target_partitions is None
            else as_int(self.target_partitions, "target_partitions"),
            factor=None if self.factor is None else as_int(self.factor, "factor"),
            require_power_of_two=self.require_power_of_two,
            dry_run=dry_run,
        )
        expansion_id = self.expansion_id or None
        try:
            with protocol_outcomes():
                store = self.store if self.job_name else None
                lease = None
                if store is not None and expansion_id and not dry_run:
                    lease = take(store, holder_of(context))
                if dry_run and expansion_id and store and not store.get_expansion(expansion_id):
                    expansion_id = None  # a dry-run plan records nothing
                result = expand(self.admin, store, request, expansion_id=expansion_id, lease=lease)
            namespace = _lineage.kafka_namespace(self.kafka_config)
            self.record_lineage(_lineage.expand_step(namespace, result))
        finally:
            self.close_clients()
        if dry_run and self.skip_on_dry_run:
            context["ti"].xcom_push(key="dry_run", value=result)
            raise AirflowSkipException(
                f"dry run: growing {self.topic} from {result['partitions_before']} to "
                f"{result['partitions_after']} partitions validated, nothing changed"
            )
        return result
