"""The plan step: validate the growth, take the expansion lease and record the intent once.

A rerun by the same holder finds the expansion it planned, done or not; a run that waited for
another holder decides on the expansion it joined; an expansion interrupted after it wrote its
job model is resumed; a dry run reads everything and writes nothing. Each of these is one
named decision of `_decide`. Its result in the record is `PlanResult`.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._protocol.outcome import close_finished
from airflow_samza_expand._protocol.ownership import (
    DEFAULT_LEASE_TTL_S,
    give_up,
    owned_by,
    take,
    taken_over,
)
from airflow_samza_expand._protocol.records import expansion_id_for, require, update
from airflow_samza_expand._protocol.restart import STRATEGIES
from airflow_samza_expand._protocol.steps.plan import checks
from airflow_samza_expand._protocol.steps.plan.job_models import (
    NoJobModelError,
    no_job_model_message,
    require_job_model,
    store_where,
)
from airflow_samza_expand._protocol.steps.plan.policy import policy_targets
from airflow_samza_expand._protocol.steps.plan.readers import TopicReaders, readers_doc
from airflow_samza_expand._protocol.steps.plan.request import (
    DRY_RUN,
    NOTHING,
    PLANNED,
    RESUMED,
    REUSED,
    PlanOutcome,
    PlanRequest,
    PlanResult,
    outcome_from_record,
)
from airflow_samza_expand._protocol.steps.plan.wait import require_live
from airflow_samza_expand.core._clock import now_iso
from airflow_samza_expand.core._lease import Lease
from airflow_samza_expand.core._liveness import job_consumer_group
from airflow_samza_expand.core._plan import (
    DEFAULT_MAX_PARTITIONS,
    ExpansionPlan,
    check_max_partitions,
    plan_expansion,
)
from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus, StepTimes
from airflow_samza_expand.core.errors import ExpansionError, StaleRevisionError
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.core.policy import GrowthDecision
from airflow_samza_expand.store import CoordinatorStore

log = logging.getLogger(__name__)


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
    known_jobs: Callable[[], Sequence[str]] | None = None,
) -> PlanOutcome:
    """Decide and record the expansion (module docstring). LeaseHeldError (a ConflictError)
    when another holder owns the job's expansion: wait (`ownership.lease_poll`), then call again
    with ``joined_holder``. ``discover(topics)`` finds the other readers of the grown topics
    (`readers.find_readers`); `OtherJobsReadTopicError` refuses by ``request.other_jobs``.
    A job without a job model is refused first (`NoJobModelError`, naming ``known_jobs()``):
    no lease taken, no coordinator topic created. A DAG that owns no launch
    (``request.launches`` False) and finds no live processor gets `plan_wait.JobDownError`
    before anything is recorded (its lease given back): wait for the job, then call again."""
    require_job_model(store, request.job_name, known_jobs)
    if warning := getattr(store, "replication_warning", None):  # a Kafka store on a cluster
        log.warning("%s", warning)
    own = owned_by(store, holder)
    if taken_over(own, holder):  # checked before the lease: a run that lost it writes nothing
        return outcome_from_record(
            NOTHING,
            own,
            f"expansion {own.expansion_id} was planned by this run ({holder}) but taken over "
            f"by {own.owner} once this run's lease had expired (status {own.status.value}): "
            "that run finishes it, nothing left to do here",
        )
    lease = None if request.dry_run else take(store, holder, lease_ttl_s)
    run = _Run(store, admin, request, holder, lease, kafka_config, discover)
    try:
        return _take_over(run, _launch_owned(run, _decide(run, joined_holder)))
    except ExpansionError:
        if lease is not None and owned_by(store, holder) is None:
            give_up(store, holder)  # a refused plan owns nothing: others need not wait for it
        raise


def _take_over(run: _Run, outcome: PlanOutcome) -> PlanOutcome:
    """A run that goes on with an unfinished expansion of another holder (reused or resumed)
    becomes its owner in the record: that holder's run, cleared later, then ends skipped."""
    if run.lease is None or outcome.kind not in (REUSED, RESUMED) or not outcome.expansion_id:
        return outcome

    def own(record: ExpansionRecord) -> ExpansionRecord | None:
        if record.owner == run.holder or record.status == ExpansionStatus.COMPLETED:
            return None
        log.info(
            "This run (%s) takes expansion %s over from %s (status %s).",
            run.holder, record.expansion_id, record.owner, record.status.value,
        )  # fmt: skip
        return dataclasses.replace(record, owner=run.holder, updated_at=now_iso())

    update(run.store, outcome.expansion_id, own, fence=run.lease)
    return outcome


def _launch_owned(run: _Run, outcome: PlanOutcome) -> PlanOutcome:
    """A DAG that owns no launch does not go on with an expansion another run planned with a
    restart that launches the job (its stop step would stop a job nobody then starts)."""
    if run.request.launches or outcome.kind not in (REUSED, RESUMED):
        return outcome
    mode = (outcome.extra.get("restart") or {}).get("mode")
    if mode in STRATEGIES and STRATEGIES[mode].launches_nothing:
        return outcome
    raise ExpansionError(
        f"expansion {outcome.expansion_id} of job {run.request.job_name!r} was planned with "
        f"a {mode or 'cold'} restart, which launches the job, but this DAG names no "
        "application and no restart task - finish it with a DAG that names how to launch the "
        "job (the one that planned it): SparkSettings(application=...) or "
        "RestartSettings(task=...)"
    )


@dataclass(frozen=True)
class _Run:
    """One plan call: what `_decide`'s named decisions share."""

    store: CoordinatorStore
    admin: KafkaAdmin
    request: PlanRequest
    holder: str
    lease: Lease | None
    kafka_config: Mapping[str, Any] | None
    discover: Callable[[Sequence[str]], TopicReaders] | None

    @functools.cached_property
    def consumer_group(self) -> str:
        """The group holding the job's processed offsets (`core._liveness.job_consumer_group`),
        read once per plan call."""
        request = self.request
        return job_consumer_group(request.job_name, self.store.processors(), request.consumer_group)

    def give_up(self) -> None:
        """Hand the lease back at once: nothing to do."""
        if self.lease is not None:
            give_up(self.store, self.holder)


def _decide(run: _Run, joined_holder: str | None) -> PlanOutcome:
    """The plan's decisions in order; the first that settles the run wins."""
    earlier = _earlier_run(run, joined_holder)
    if earlier is not None:
        return earlier
    model = run.store.latest_job_model()
    if model is None:
        raise NoJobModelError(
            no_job_model_message(run.request.job_name, store_where(run.store), None)
        )
    # A record an earlier version left open although its expansion is done on the cluster is
    # completed here, never resumed: the new intent is planned (a dry run only looks)
    finished = close_finished(run.store, run.admin, model, run.lease, write=run.lease is not None)
    decisions: list[GrowthDecision] = []
    if run.request.policy is not None and not run.request.targets:
        settled, decisions, wanted = _by_policy(run, model, finished)
        if settled is not None:
            return settled
        run = dataclasses.replace(
            run, request=dataclasses.replace(run.request, targets=wanted, topics=())
        )
    targets = checks.wanted_targets(run.request, model.partition_counts(), run.admin)
    check_max_partitions(run.request.job_name, targets, int(run.request.max_partitions))
    settled = _resume_or_nothing(run, model, targets, finished)
    if settled is not None:
        return settled
    run.admin.partition_counts(sorted(targets))  # UnknownTopicError names a missing topic first
    live = run.admin.partition_counts(sorted(model.partition_counts()))
    the_plan = plan_expansion(
        model, live, targets, require_power_of_two=run.request.require_power_of_two,
        created_at=model.created_at, created_by=run.holder,
        max_partitions=int(run.request.max_partitions),
    )  # fmt: skip
    grown = the_plan.grown_counts()
    before, after = ({s: c[i] for s, c in grown.items()} for i in (0, 1))
    expansion_id = expansion_id_for(run.request.job_name, before, after)
    settled = _planned_before(run, the_plan, expansion_id)
    if settled is not None:
        return settled
    return _record_new(run, the_plan, expansion_id, live, decisions)


def _earlier_run(run: _Run, joined_holder: str | None) -> PlanOutcome | None:
    """This holder planned already (reuse it), or the joined holder's expansion: completed
    (nothing to do) or left unfinished (this run finishes it)."""
    own = owned_by(run.store, run.holder)
    if own is not None:
        return outcome_from_record(
            REUSED,
            own,
            f"expansion {own.expansion_id} was planned by this run ({run.holder}), "
            f"status {own.status.value}: reusing it",
        )
    joined = owned_by(run.store, joined_holder) if joined_holder else None
    if joined is None:
        return None
    if joined.status == ExpansionStatus.COMPLETED:
        give_up(run.store, run.holder)  # nothing to do: the lease goes back at once
        return outcome_from_record(
            NOTHING,
            joined,
            f"joined expansion {joined.expansion_id} of {joined_holder}: "
            "it has completed, nothing left to do (trigger again to grow further)",
        )
    return outcome_from_record(
        RESUMED,
        joined,
        f"{joined_holder} left expansion {joined.expansion_id} at "
        f"{joined.status.value}: this run ({run.holder}) finishes it",
    )


def _by_policy(
    run: _Run, model: JobModel, finished: Collection[str]
) -> tuple[PlanOutcome | None, list[GrowthDecision], dict[str, int]]:
    """The growth policy: resume an interrupted expansion first; else measure, and settle
    with nothing to do when no threshold is crossed; else the targets it wants."""
    interrupted = checks.interrupted(run.store, model, finished)
    if interrupted is not None:
        message = (
            f"job model v{model.version} was written by expansion {interrupted.expansion_id}, "
            "which has not completed: resuming it before the growth policy measures again"
        )
        return outcome_from_record(RESUMED, interrupted, message), [], {}
    request = run.request
    wanted, decisions = policy_targets(
        run.store, run.admin, request.policy, list(request.topics),  # type: ignore[arg-type]
        model.partition_counts(), run.consumer_group,
    )  # fmt: skip
    if wanted:
        return None, list(decisions), wanted
    run.give_up()
    nothing = PlanOutcome(
        NOTHING,
        "growth policy: no threshold crossed, nothing to expand - "
        + "; ".join(d.describe() for d in decisions),
        extra={"policy": [d.to_dict() for d in decisions]},
    )
    return nothing, list(decisions), {}


def _resume_or_nothing(
    run: _Run, model: JobModel, targets: Mapping[str, int], finished: Collection[str]
) -> PlanOutcome | None:
    """An unfinished expansion that wrote the model and grew what is asked (resume it), or a
    model that already matches the live counts (nothing to expand)."""
    resumed = checks.unfinished(run.store, model, run.request, targets, finished)
    if resumed is not None:
        return outcome_from_record(
            RESUMED,
            resumed,
            f"job model v{model.version} was written by expansion "
            f"{resumed.expansion_id}, which has not completed: resuming it",
        )
    if run.request.follow_live_counts and all(
        model.partition_counts().get(t) == n for t, n in targets.items()
    ):
        run.give_up()
        return PlanOutcome(
            NOTHING,
            f"job model v{model.version} already matches the live counts {targets}: "
            "nothing to expand",
        )
    return None


def _planned_before(run: _Run, the_plan: ExpansionPlan, expansion_id: str) -> PlanOutcome | None:
    """The same expansion already has a record: reuse it, unless it grew an earlier job of the
    same name (a refusal)."""
    existing = run.store.get_expansion(expansion_id)
    if existing is None:
        return None
    if existing.base_version != the_plan.old_version:
        raise ExpansionError(
            f"expansion record {expansion_id!r} exists from job model v"
            f"{existing.base_version} (planned at {existing.created_at}), but job "
            f"{run.request.job_name!r} is at v{the_plan.old_version}: an earlier job of the same "
            "name grew the same way - use a new job name or remove the record"
        )
    return outcome_from_record(
        REUSED,
        existing,
        f"expansion {expansion_id} is already planned (status "
        f"{existing.status.value}, by {existing.owner}): reusing its record",
    )


def _record_new(
    run: _Run,
    the_plan: ExpansionPlan,
    expansion_id: str,
    live: Mapping[str, int],
    decisions: Sequence[GrowthDecision],
) -> PlanOutcome:
    """Measure (readers, restart, conformance, lag) and record the intent once (a dry run
    records nothing)."""
    request = run.request
    found = readers_doc(
        request.job_name, sorted(the_plan.streams_grown), run.discover, request.other_jobs,
        request.co_jobs,
    )  # fmt: skip
    started = now_iso()
    if request.restart is not None and not request.launches:
        require_live(run.store, request.job_name)  # JobDownError: the DAG never launches it
    restart = checks.restart_doc(run.store, request, the_plan.old_version)
    conformance = checks.conformance(
        run.kafka_config, the_plan, live, check_partitioner=request.check_partitioner,
        sample_per_partition=request.sample_per_partition,
        request_timeout_s=request.request_timeout_s,
    )  # fmt: skip
    lag = checks.group_lag(run.admin, the_plan, run.consumer_group)
    policy = checks.policy_doc(decisions)
    if request.dry_run:
        message = f"dry run: expansion {expansion_id} validated, nothing recorded"
        return PlanOutcome(
            DRY_RUN, message, expansion_id, the_plan.to_dict(), lag, conformance,
            extra=policy | found,
        )  # fmt: skip
    result = PlanResult(
        run.holder, lag, conformance, policy.get("policy"), found.get("readers"),
        restart.get("restart"),
    )  # fmt: skip
    record = ExpansionRecord(
        expansion_id=expansion_id,
        job_name=request.job_name,
        base_version=the_plan.old_version,
        target_version=the_plan.new_version,
        plan=the_plan.to_dict(),
        status=ExpansionStatus.PLANNED,
        owner=run.holder,
        created_at=started,
        updated_at=now_iso(),
        steps={"plan": StepTimes(started, now_iso())},
        results={"plan": result.to_dict()},
    )
    return _store_new(run, record, the_plan)


def _store_new(run: _Run, record: ExpansionRecord, the_plan: ExpansionPlan) -> PlanOutcome:
    """Store the new record (revision 0); planned concurrently: reuse that one."""
    expansion_id = record.expansion_id
    try:
        stored = run.store.put_expansion(record, expected_revision=0, fence=run.lease)
    except StaleRevisionError:
        return outcome_from_record(
            REUSED,
            require(run.store, expansion_id),
            f"expansion {expansion_id} was planned concurrently: reusing that record",
        )
    moves = ", ".join(f"{s} {b}->{a}" for s, (b, a) in the_plan.grown_counts().items())
    return outcome_from_record(
        PLANNED,
        stored,
        f"planned expansion {expansion_id} of job {run.request.job_name}: {moves}; "
        f"job model v{the_plan.old_version} -> v{the_plan.new_version}, "
        f"{len(the_plan.new_ssps)} new SSPs, barrier on {len(the_plan.barrier_ssps)} old "
        "partitions",
    )


__all__ = [
    "DEFAULT_MAX_PARTITIONS",
    "PlanOutcome",
    "PlanRequest",
    "PlanResult",
    "plan",
]
