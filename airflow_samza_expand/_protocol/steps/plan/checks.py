"""The plan step's look-ups and measurements before it records anything: the targets asked
for, the unfinished expansion to resume, the restart chosen, the partitioner
conformance of each grown topic (a refusal when keys are misplaced) and the job's lag on the
old partitions. The decisions are in `_protocol.steps.plan.step`."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._protocol.records import expansion_id_for
from airflow_samza_expand._protocol.restart import choose_restart
from airflow_samza_expand.core._plan import ExpansionPlan
from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.core.policy import GrowthDecision
from airflow_samza_expand.store import CoordinatorStore

if TYPE_CHECKING:
    from airflow_samza_expand._protocol.steps.plan.request import PlanRequest

log = logging.getLogger(__name__)


def wanted_targets(
    request: PlanRequest, counts: Mapping[str, int], admin: KafkaAdmin
) -> dict[str, int]:
    """{topic: count} the request asks for, against the model counts `counts`."""
    if request.targets:
        return {str(t): int(n) for t, n in dict(request.targets).items()}
    topics = list(request.topics)
    if request.follow_live_counts:
        return admin.partition_counts(topics)  # UnknownTopicError names a bad one
    factor = int(request.factor)
    # A topic the job does not read has no model count; plan_expansion names it.
    return {t: counts.get(t, 0) * factor or factor for t in topics}


def interrupted(
    store: CoordinatorStore, latest: JobModel, finished: Collection[str] = ()
) -> ExpansionRecord | None:
    """The unfinished expansion that wrote `latest`, whatever it grew (policy runs); one of
    `finished` (done on the cluster, `outcome.close_finished`) is not resumed."""
    for record in store.expansions():
        if record.expansion_id in finished:
            continue
        if record.target_version == latest.version and record.status not in (
            ExpansionStatus.COMPLETED,
            ExpansionStatus.FAILED,
        ):
            return record
    return None


def policy_doc(decisions: Sequence[GrowthDecision]) -> dict[str, Any]:
    """{"policy": [decision, ...]} when a growth policy decided the targets, else {}."""
    return {"policy": [d.to_dict() for d in decisions]} if decisions else {}


def unfinished(
    store: CoordinatorStore,
    latest: JobModel,
    request: PlanRequest,
    targets: Mapping[str, int],
    finished: Collection[str] = (),
) -> ExpansionRecord | None:
    """The expansion that wrote `latest` and has not completed, if it grew what is asked; one
    of `finished` (done on the cluster, `outcome.close_finished`) is not resumed."""
    previous = store.job_model(latest.version - 1) if latest.version >= 2 else None
    if previous is None:
        return None
    before_all, after_all = previous.partition_counts(), latest.partition_counts()
    grown = {s: n for s, n in after_all.items() if before_all.get(s) not in (None, n)}
    if not grown:
        return None
    before = {s: before_all[s] for s in grown}
    wanted = (
        dict(targets)
        if (request.targets or request.follow_live_counts)
        else {t: before.get(t, 0) * int(request.factor) for t in request.topics}
    )
    if wanted != grown:
        return None
    record = store.get_expansion(expansion_id_for(request.job_name, before, grown))
    if record is None or record.status == ExpansionStatus.COMPLETED:
        return None
    if record.expansion_id in finished:
        return None
    return record if record.target_version == latest.version else None


def restart_doc(store: CoordinatorStore, request: PlanRequest, version: int) -> dict[str, Any]:
    """``{"restart": choice}`` (from the running processors' capabilities) or {}; an
    explicit warm handover of a job that cannot be a standby is refused here, before anything
    changes."""
    if request.restart is None:
        return {}
    choice = choose_restart(store.processors(), version, request.restart, launches=request.launches)
    log.info("Restart: %s (%s).", choice.restart, choice.reason)
    return {"restart": choice.to_dict()}


def conformance(
    kafka_config: Mapping[str, Any] | None,
    the_plan: ExpansionPlan,
    live: Mapping[str, int],
    *,
    check_partitioner: bool,
    sample_per_partition: int,
    request_timeout_s: float,
) -> dict[str, Any]:
    """Sample each grown topic; PartitionerMismatchError (a refusal) if keys are misplaced."""
    if not check_partitioner or kafka_config is None:
        return {}
    from airflow_samza_expand._kafka.conformance import check_conformance

    report: dict[str, Any] = {}
    for topic in the_plan.streams_grown:
        stream = the_plan.new_job_model.stream(topic)
        log.info(
            "Sampling up to %d keyed records per partition of %s to check its partitioner.",
            sample_per_partition,
            topic,
        )
        result = check_conformance(
            kafka_config,
            topic,
            partition_count=live[topic],
            sample_per_partition=sample_per_partition,
            earlier_counts=doublings(stream.initial, the_plan.counts_before[topic]),
            timeout_s=request_timeout_s,
        ).raise_if_mismatch()
        log.info("%s", result.describe())
        report[topic] = result.to_dict()
    return report


def doublings(initial: int, current: int) -> list[int]:
    """initial, 2*initial, ... up to current: every count the topic may have had."""
    counts, n = [], initial
    while 0 < n <= current:
        counts.append(n)
        n *= 2
    return counts


def group_lag(admin: KafkaAdmin, the_plan: ExpansionPlan, group: str) -> dict[str, Any]:
    """The job's lag (high watermark - committed offset) on the old partitions."""
    partitions: dict[str, list[int]] = {}
    for ssp in the_plan.barrier_ssps:
        partitions.setdefault(ssp.stream, []).append(ssp.partition)
    highs = admin.high_watermarks(partitions)
    committed = admin.group_offsets(group, partitions)
    lag: dict[str, dict[str, int]] = {}
    total = 0
    for topic, ps in sorted(partitions.items()):
        for p in sorted(ps):
            behind = max(highs[topic][p] - (committed[topic].get(p) or 0), 0)
            lag.setdefault(topic, {})[str(p)] = behind
            total += behind
    log.info("Current lag of consumer group %s: total %d, per partition %s", group, total, lag)
    return {"group": group, "total": total, "per_partition": lag}


__all__ = [
    "conformance",
    "doublings",
    "group_lag",
    "interrupted",
    "policy_doc",
    "restart_doc",
    "unfinished",
    "wanted_targets",
]
