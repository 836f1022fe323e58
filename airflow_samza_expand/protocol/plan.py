"""The plan step: validate the growth, take the expansion lease and record the intent once.

A rerun by the same holder finds the expansion it planned, done or not; a run that waited for
another holder decides on the expansion it joined; an expansion interrupted after it wrote its
job model is resumed; a dry run reads everything and writes nothing.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_samza_expand.core.clock import now_iso
from airflow_samza_expand.core.errors import ExpansionError, StaleRevisionError
from airflow_samza_expand.core.lease import Lease
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.core.plan import (
    DEFAULT_MAX_PARTITIONS,
    ExpansionPlan,
    check_max_partitions,
    plan_expansion,
)
from airflow_samza_expand.core.policy import GrowthDecision, GrowthPolicy
from airflow_samza_expand.core.record import ExpansionRecord, ExpansionStatus, StepTimes
from airflow_samza_expand.kafka.admin import KafkaAdmin
from airflow_samza_expand.protocol.handover import choose_restart
from airflow_samza_expand.protocol.ownership import DEFAULT_LEASE_TTL_S, give_up, owned_by, take
from airflow_samza_expand.protocol.policy import policy_targets
from airflow_samza_expand.protocol.readers import TopicReaders, readers_doc
from airflow_samza_expand.protocol.records import expansion_id_for, require
from airflow_samza_expand.store import CoordinatorStore

log = logging.getLogger(__name__)

PLANNED, REUSED, RESUMED, NOTHING, DRY_RUN = (
    "planned",
    "reused",
    "resumed",
    "nothing-to-do",
    "dry-run",
)


@dataclass(frozen=True)
class PlanRequest:
    """What a run asks for: ``targets`` ({topic: count}) or ``topics`` x ``factor``."""

    job_name: str
    targets: Mapping[str, int] | None = None
    topics: Sequence[str] = ()
    factor: int = 2
    follow_live_counts: bool = False
    require_power_of_two: bool = True
    max_partitions: int = DEFAULT_MAX_PARTITIONS
    check_partitioner: bool = True
    sample_per_partition: int = 100
    consumer_group: str | None = None
    dry_run: bool = False
    request_timeout_s: float = 30.0
    policy: GrowthPolicy | None = None  # grow only when a live figure crosses a threshold
    other_jobs: str = "refuse"  # other managed jobs reading a grown topic: readers.py
    co_jobs: Sequence[str] = ()  # the other jobs this run expands too (multi-job factory)
    # the restart asked for (protocol.handover: auto/warm/cold; None: the plan chooses none)
    restart: str | None = None


@dataclass(frozen=True)
class PlanOutcome:
    """The plan step's decision; `to_xcom` is what the plan task returns."""

    kind: str
    message: str
    expansion_id: str | None = None
    plan: Mapping[str, Any] | None = None
    lag: Mapping[str, Any] | None = None
    conformance: Mapping[str, Any] | None = None
    status: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_xcom(self) -> dict[str, Any]:
        return {
            "expansion_id": self.expansion_id,
            "plan": dict(self.plan or {}),
            "lag": self.lag,
            "conformance": self.conformance,
            "reused": self.kind in (REUSED, RESUMED),
            "outcome": self.kind,
            "dry_run": self.kind == DRY_RUN,
            "policy": self.extra.get("policy"),
            "readers": self.extra.get("readers"),
            "unmanaged_groups": (self.extra.get("readers") or {}).get("groups", []),
            "restart": self.extra.get("restart"),
        }


def _from_record(kind: str, record: ExpansionRecord, message: str) -> PlanOutcome:
    planned = record.results.get("plan") or {}
    policy = {k: planned[k] for k in ("policy", "readers", "restart") if planned.get(k)}
    return PlanOutcome(
        kind,
        message,
        record.expansion_id,
        record.plan,
        planned.get("lag"),
        planned.get("conformance"),
        record.status.value,
        policy,
    )


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


def plan(
    store: CoordinatorStore,
    admin: KafkaAdmin,
    request: PlanRequest,
    holder: str,
    *,
    kafka_config: Mapping[str, Any] | None = None,
    joined_holder: str | None = None,
    lease_ttl_s: float = DEFAULT_LEASE_TTL_S,
    discover: Callable[[Sequence[str]], TopicReaders] | None = None,
) -> PlanOutcome:
    """Decide and record the expansion (module docstring). LeaseHeldError (a ConflictError)
    when another holder owns the job's expansion: wait (`ownership.lease_poll`), then call again
    with ``joined_holder``. ``discover(topics)`` finds the other readers of the grown topics
    (`readers.find_readers`); `OtherJobsReadTopicError` refuses by ``request.other_jobs``."""
    lease = None if request.dry_run else take(store, holder, lease_ttl_s)
    try:
        return _decide(store, admin, request, holder, lease, kafka_config, joined_holder, discover)
    except ExpansionError:
        if lease is not None and owned_by(store, holder) is None:
            give_up(store, holder)  # a refused plan owns nothing: others need not wait for it
        raise


def _decide(
    store: CoordinatorStore,
    admin: KafkaAdmin,
    request: PlanRequest,
    holder: str,
    lease: Lease | None,
    kafka_config: Mapping[str, Any] | None,
    joined_holder: str | None,
    discover: Callable[[Sequence[str]], TopicReaders] | None = None,
) -> PlanOutcome:
    own = owned_by(store, holder)
    if own is not None:
        return _from_record(
            REUSED,
            own,
            f"expansion {own.expansion_id} was planned by this run ({holder}), "
            f"status {own.status.value}: reusing it",
        )
    if joined_holder:
        joined = owned_by(store, joined_holder)
        if joined is not None and joined.status == ExpansionStatus.COMPLETED:
            give_up(store, holder)  # nothing to do: the lease goes back at once
            return _from_record(
                NOTHING,
                joined,
                f"joined expansion {joined.expansion_id} of {joined_holder}: "
                "it has completed, nothing left to do (trigger again to grow further)",
            )
        if joined is not None:
            return _from_record(
                RESUMED,
                joined,
                f"{joined_holder} left expansion {joined.expansion_id} at "
                f"{joined.status.value}: this run ({holder}) finishes it",
            )
    model = store.latest_job_model()
    if model is None:
        raise ExpansionError(
            f"job {request.job_name!r} has no job model in its coordinator store - start the "
            "job once (it writes v1) before expanding it"
        )
    decisions: list[GrowthDecision] = []
    if request.policy is not None and not request.targets:
        interrupted = _interrupted(store, model)
        if interrupted is not None:
            return _from_record(
                RESUMED,
                interrupted,
                f"job model v{model.version} was written by expansion "
                f"{interrupted.expansion_id}, which has not completed: resuming it before the "
                "growth policy measures again",
            )
        wanted, decisions = policy_targets(
            store,
            admin,
            request.policy,
            list(request.topics),
            model.partition_counts(),
            request.consumer_group or request.job_name,
        )
        figures = {"policy": [d.to_dict() for d in decisions]}
        if not wanted:
            if lease is not None:
                give_up(store, holder)
            return PlanOutcome(
                NOTHING,
                "growth policy: no threshold crossed, nothing to expand - "
                + "; ".join(d.describe() for d in decisions),
                extra=figures,
            )
        request = dataclasses.replace(request, targets=wanted, topics=())
    targets = wanted_targets(request, model.partition_counts(), admin)
    check_max_partitions(request.job_name, targets, int(request.max_partitions))
    resumed = _unfinished(store, model, request, targets)
    if resumed is not None:
        return _from_record(
            RESUMED,
            resumed,
            f"job model v{model.version} was written by expansion "
            f"{resumed.expansion_id}, which has not completed: resuming it",
        )
    if request.follow_live_counts and all(
        model.partition_counts().get(t) == n for t, n in targets.items()
    ):
        if lease is not None:
            give_up(store, holder)
        return PlanOutcome(
            NOTHING,
            f"job model v{model.version} already matches the live counts {targets}: "
            "nothing to expand",
        )
    admin.partition_counts(sorted(targets))  # UnknownTopicError names a missing topic first
    live = admin.partition_counts(sorted(model.partition_counts()))
    the_plan = plan_expansion(
        model,
        live,
        targets,
        require_power_of_two=request.require_power_of_two,
        created_at=model.created_at,
        created_by=holder,
        max_partitions=int(request.max_partitions),
    )
    grown = the_plan.grown_counts()
    before = {s: b for s, (b, _) in grown.items()}
    expansion_id = expansion_id_for(request.job_name, before, {s: a for s, (_, a) in grown.items()})
    existing = store.get_expansion(expansion_id)
    if existing is not None:
        if existing.base_version != the_plan.old_version:
            raise ExpansionError(
                f"expansion record {expansion_id!r} exists from job model v"
                f"{existing.base_version} (planned at {existing.created_at}), but job "
                f"{request.job_name!r} is at v{the_plan.old_version}: an earlier job of the same "
                "name grew the same way - use a new job name or remove the record"
            )
        return _from_record(
            REUSED,
            existing,
            f"expansion {expansion_id} is already planned (status "
            f"{existing.status.value}, by {existing.owner}): reusing its record",
        )
    found = readers_doc(
        request.job_name,
        sorted(the_plan.streams_grown),
        discover,
        request.other_jobs,
        request.co_jobs,
    )
    started = now_iso()
    restart = _restart(store, request, the_plan.old_version)
    conformance = _conformance(kafka_config, the_plan, live, request)
    lag = _lag(admin, the_plan, request.consumer_group or request.job_name)
    if request.dry_run:
        return PlanOutcome(
            DRY_RUN,
            f"dry run: expansion {expansion_id} validated, nothing recorded",
            expansion_id,
            the_plan.to_dict(),
            lag,
            conformance,
            extra=_policy_doc(decisions) | found,
        )
    record = ExpansionRecord(
        expansion_id=expansion_id,
        job_name=request.job_name,
        base_version=the_plan.old_version,
        target_version=the_plan.new_version,
        plan=the_plan.to_dict(),
        status=ExpansionStatus.PLANNED,
        owner=holder,
        created_at=started,
        updated_at=now_iso(),
        steps={"plan": StepTimes(started, now_iso())},
        results={
            "plan": {"holder": holder, "lag": lag, "conformance": conformance}
            | _policy_doc(decisions)
            | found
            | restart
        },
    )
    try:
        stored = store.put_expansion(record, expected_revision=0, fence=lease)
    except StaleRevisionError:
        return _from_record(
            REUSED,
            require(store, expansion_id),
            f"expansion {expansion_id} was planned concurrently: reusing that record",
        )
    moves = ", ".join(f"{s} {b}->{a}" for s, (b, a) in grown.items())
    return _from_record(
        PLANNED,
        stored,
        f"planned expansion {expansion_id} of job {request.job_name}: {moves}; "
        f"job model v{the_plan.old_version} -> v{the_plan.new_version}, "
        f"{len(the_plan.new_ssps)} new SSPs, barrier on {len(the_plan.barrier_ssps)} old "
        "partitions",
    )


def _interrupted(store: CoordinatorStore, latest: JobModel) -> ExpansionRecord | None:
    """The unfinished expansion that wrote `latest`, whatever it grew (policy runs)."""
    for record in store.expansions():
        if record.target_version == latest.version and record.status not in (
            ExpansionStatus.COMPLETED,
            ExpansionStatus.FAILED,
        ):
            return record
    return None


def _policy_doc(decisions: Sequence[GrowthDecision]) -> dict[str, Any]:
    """{"policy": [decision, ...]} when a growth policy decided the targets, else {}."""
    return {"policy": [d.to_dict() for d in decisions]} if decisions else {}


def _unfinished(
    store: CoordinatorStore, latest: JobModel, request: PlanRequest, targets: Mapping[str, int]
) -> ExpansionRecord | None:
    """The expansion that wrote `latest` and has not completed, if it grew what is asked."""
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
    return record if record.target_version == latest.version else None


def _conformance(
    kafka_config: Mapping[str, Any] | None,
    the_plan: ExpansionPlan,
    live: Mapping[str, int],
    request: PlanRequest,
) -> dict[str, Any]:
    """Sample each grown topic; PartitionerMismatchError (a refusal) if keys are misplaced."""
    if not request.check_partitioner or kafka_config is None:
        return {}
    from airflow_samza_expand.kafka.conformance import check_conformance

    report: dict[str, Any] = {}
    for topic in the_plan.streams_grown:
        stream = the_plan.new_job_model.stream(topic)
        log.info(
            "Sampling up to %d keyed records per partition of %s to check its partitioner.",
            request.sample_per_partition,
            topic,
        )
        result = check_conformance(
            kafka_config,
            topic,
            partition_count=live[topic],
            sample_per_partition=request.sample_per_partition,
            earlier_counts=_doublings(stream.initial, the_plan.counts_before[topic]),
            timeout_s=request.request_timeout_s,
        ).raise_if_mismatch()
        log.info("%s", result.describe())
        report[topic] = result.to_dict()
    return report


def _restart(store: CoordinatorStore, request: PlanRequest, version: int) -> dict[str, Any]:
    """``{"restart": choice}`` (rule 1.8, from the running processors' capabilities) or {}; an
    explicit warm handover of a job that cannot be a standby is refused here, before anything
    changes."""
    if request.restart is None:
        return {}
    choice = choose_restart(store.processors(), version, request.restart)
    log.info("Restart: %s (%s).", choice.mode, choice.reason)
    return {"restart": choice.to_dict()}


def _doublings(initial: int, current: int) -> list[int]:
    """initial, 2*initial, ... up to current: every count the topic may have had."""
    counts, n = [], initial
    while 0 < n <= current:
        counts.append(n)
        n *= 2
    return counts


def _lag(admin: KafkaAdmin, the_plan: ExpansionPlan, group: str) -> dict[str, Any]:
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
    "DEFAULT_MAX_PARTITIONS",
    "PlanOutcome",
    "PlanRequest",
    "plan",
    "wanted_targets",
]
