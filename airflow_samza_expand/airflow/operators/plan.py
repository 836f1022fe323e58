"""PlanExpansionOperator: validate an expansion and record it in the job's coordinator store."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_samza_expand.airflow.hooks import DEFAULT_COORDINATOR, SamzaExpandKafkaHook
from airflow_samza_expand.airflow.operators._common import (
    DEFAULT_CONN_ID,
    close_quietly,
    expansion_id_for,
    refusals_fail_task,
    task_identity,
    utc_now_iso,
)
from airflow_samza_expand.core.plan import ExpansionPlan, plan_expansion


class PlanExpansionOperator(BaseOperator):
    """Plan growing the job's input topics and record the plan as an expansion record.

    Checks, changing nothing on refusal (``AirflowFailException``): every topic exists, each
    growth is ``x2^k`` of the job model's count (never a shrink), the job's grouper keeps
    state on expansion, and sampled keyed records sit at ``hash(key) % N`` under murmur2 or
    CRC32 (``check_partitioner``). Logs the job's current lag on the topics.

    Targets: ``targets={"orders": 8}``, or ``topics=["orders"]`` with ``factor`` (default 2)
    applied to the job model's counts. The expansion id is derived from job, topics and counts,
    so a rerun finds its record and returns the same plan. Returns (XCom)
    ``{expansion_id, plan, lag, conformance, reused}``; ``plan`` is ``ExpansionPlan.to_dict()``.
    """

    template_fields: Sequence[str] = ("job_name", "targets", "topics", "factor", "coordinator")
    template_fields_renderers = {"targets": "json"}
    ui_color = "#efe3ff"

    def __init__(
        self,
        *,
        job_name: str,
        targets: Mapping[str, int] | None = None,
        topics: str | Sequence[str] | None = None,
        factor: int = 2,
        require_power_of_two: bool = True,
        check_partitioner: bool = True,
        sample_per_partition: int = 100,
        consumer_group: str | None = None,
        coordinator: str = DEFAULT_COORDINATOR,
        kafka_config_id: str = DEFAULT_CONN_ID,
        request_timeout_s: float = 30.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if (targets is None) == (topics is None):
            raise ValueError(
                f"{self.task_id}: pass exactly one of targets={{'topic': count}} or "
                f"topics=['topic'] (with factor=2)"
            )
        self.job_name = job_name
        self.targets = targets
        self.topics = topics
        self.factor = factor
        self.require_power_of_two = require_power_of_two
        self.check_partitioner = check_partitioner
        self.sample_per_partition = sample_per_partition
        self.consumer_group = consumer_group
        self.coordinator = coordinator
        self.kafka_config_id = kafka_config_id
        self.request_timeout_s = request_timeout_s

    def execute(self, context: Any) -> dict[str, Any]:
        hook = SamzaExpandKafkaHook(kafka_config_id=self.kafka_config_id)
        config = hook.client_config()
        admin = hook.get_admin(config, timeout_s=self.request_timeout_s)
        store = hook.get_coordinator_store(self.job_name, self.coordinator, config)
        try:
            with refusals_fail_task():
                return self._plan(config, admin, store, task_identity(context))
        finally:
            close_quietly(admin, store)

    def _plan(self, config: Any, admin: Any, store: Any, writer: str) -> dict[str, Any]:
        model = store.latest_job_model()
        if model is None:
            raise AirflowFailException(
                f"job {self.job_name!r} has no job model in its coordinator store "
                f"({self.coordinator}) - start the job once (it writes v1) before expanding it"
            )
        targets = self._targets(model.partition_counts())
        admin.partition_counts(sorted(targets))  # UnknownTopicError names a missing topic first
        live = admin.partition_counts(sorted(model.partition_counts()))
        plan = plan_expansion(
            model,
            live,
            targets,
            require_power_of_two=self.require_power_of_two,
            created_at=model.created_at,
            created_by=writer,
        )
        grown = plan.grown_counts()
        expansion_id = expansion_id_for(
            self.job_name,
            {s: b for s, (b, _) in grown.items()},
            {s: a for s, (_, a) in grown.items()},
        )
        existing = store.get_expansion(expansion_id)
        if existing is not None and existing.get("plan"):
            if int(existing.get("old_version", -1)) != plan.old_version:
                raise AirflowFailException(
                    f"expansion record {expansion_id!r} exists from job model "
                    f"v{existing.get('old_version')} (planned at {existing.get('planned_at')}), "
                    f"but job {self.job_name!r} is at v{plan.old_version}: an earlier job of "
                    "the same name grew the same way - use a new job name or remove the record"
                )
            self.log.info(
                "Expansion %s is already planned (status %s, planned at %s): reusing its record.",
                expansion_id,
                existing.get("status"),
                existing.get("planned_at"),
            )
            return _result(expansion_id, existing, reused=True)

        conformance = self._conformance(config, plan, live) if self.check_partitioner else {}
        lag = self._lag(admin, plan)
        record = {
            "expansion_id": expansion_id,
            "job_name": self.job_name,
            "status": "planned",
            "planned_at": utc_now_iso(),
            "planned_by": writer,
            "old_version": plan.old_version,
            "new_version": plan.new_version,
            "counts_before": {s: b for s, (b, _) in grown.items()},
            "counts_after": {s: a for s, (_, a) in grown.items()},
            "plan": plan.to_dict(),
            "lag_at_plan": lag,
            "conformance": conformance,
        }
        store.put_expansion(expansion_id, record)
        self.log.info(
            "Planned expansion %s of job %s: %s; job model v%d -> v%d, %d new SSPs, barrier on "
            "%d old partitions.",
            expansion_id,
            self.job_name,
            ", ".join(f"{s} {b}->{a}" for s, (b, a) in grown.items()),
            plan.old_version,
            plan.new_version,
            len(plan.new_ssps),
            len(plan.barrier_ssps),
        )
        return _result(expansion_id, record, reused=False)

    def _targets(self, model_counts: Mapping[str, int]) -> dict[str, int]:
        if self.targets is not None:
            return {str(t): int(n) for t, n in dict(self.targets).items()}
        topics = [self.topics] if isinstance(self.topics, str) else list(self.topics or [])
        factor = int(self.factor)
        # A topic the job does not read gets no model count; plan_expansion names it.
        return {t: model_counts.get(t, 0) * factor or factor for t in topics}

    def _conformance(
        self, config: Any, plan: ExpansionPlan, live: Mapping[str, int]
    ) -> dict[str, Any]:
        """Sample each grown topic; PartitionerMismatchError (a refusal) if keys are misplaced."""
        from airflow_samza_expand.kafka.conformance import check_conformance

        report: dict[str, Any] = {}
        for topic in plan.streams_grown:
            stream = plan.new_job_model.stream(topic)
            earlier = _doublings(stream.initial, plan.counts_before[topic])
            self.log.info(
                "Sampling up to %d keyed records per partition of %s to check its partitioner.",
                self.sample_per_partition,
                topic,
            )
            result = check_conformance(
                config,
                topic,
                partition_count=live[topic],
                sample_per_partition=self.sample_per_partition,
                earlier_counts=earlier,
                timeout_s=self.request_timeout_s,
            ).raise_if_mismatch()
            self.log.info("%s", result.describe())
            report[topic] = result.to_dict()
        return report

    def _lag(self, admin: Any, plan: ExpansionPlan) -> dict[str, Any]:
        """The job's lag (high watermark - committed offset) on the old partitions."""
        group = self.consumer_group or self.job_name
        partitions: dict[str, list[int]] = {}
        for ssp in plan.barrier_ssps:
            partitions.setdefault(ssp.stream, []).append(ssp.partition)
        highs = admin.high_watermarks(partitions)
        committed = admin.group_offsets(group, partitions)
        lag: dict[str, dict[str, int]] = {}
        total = 0
        for topic, ps in sorted(partitions.items()):
            for p in sorted(ps):
                behind = highs[topic][p] - (committed[topic].get(p) or 0)
                lag.setdefault(topic, {})[str(p)] = max(behind, 0)
                total += max(behind, 0)
        self.log.info(
            "Current lag of consumer group %s: total %d, per partition %s", group, total, lag
        )
        return {"group": group, "total": total, "per_partition": lag}


def _doublings(initial: int, current: int) -> list[int]:
    """initial, 2*initial, ... up to current: every count the topic may have had."""
    counts, n = [], initial
    while 0 < n <= current:
        counts.append(n)
        n *= 2
    return counts


def _result(expansion_id: str, record: Mapping[str, Any], *, reused: bool) -> dict[str, Any]:
    return {
        "expansion_id": expansion_id,
        "plan": record["plan"],
        "lag": record.get("lag_at_plan"),
        "conformance": record.get("conformance"),
        "reused": reused,
    }
