"""The expand step: grow one topic to its planned count, at most once per expansion intent.

Right before CreatePartitions it stores where the barrier's stale-placement scan starts
(`evidence.record_scan_start`). Its result in the record is `ExpandResult`: each grown
topic's count, when, and whether this step applied it."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_samza_expand._kafka.admin import KafkaAdmin, KafkaUnavailableError
from airflow_samza_expand._protocol import records
from airflow_samza_expand._protocol.barrier import evidence
from airflow_samza_expand.core._clock import now_iso
from airflow_samza_expand.core._lease import Lease
from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus
from airflow_samza_expand.core.errors import (
    ExpansionError,
    InvalidGrowthError,
    InvalidTransitionError,
)
from airflow_samza_expand.core.expansion import validate_growth
from airflow_samza_expand.store import CoordinatorStore

if TYPE_CHECKING:
    from airflow_samza_expand.store._roles import JobModelReader

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicGrown:
    """One topic of ``results["expand"]``: its count, when, and whether this step grew it."""

    partitions: int
    at: str
    applied: bool


@dataclass(frozen=True)
class ExpandResult:
    """``results["expand"]``: ``{topic: {partitions, at, applied}}``."""

    topics: Mapping[str, TopicGrown]

    def to_dict(self) -> dict[str, Any]:
        return {
            t: {"partitions": g.partitions, "at": g.at, "applied": g.applied}
            for t, g in self.topics.items()
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any] | None) -> ExpandResult:
        return cls(
            {
                str(t): TopicGrown(int(g["partitions"]), str(g.get("at")), bool(g.get("applied")))
                for t, g in (doc or {}).items()
            }
        )

    @classmethod
    def of(cls, record: ExpansionRecord) -> ExpandResult:
        return cls.from_dict(record.results.get("expand"))


@dataclass(frozen=True)
class ExpandRequest:
    """Grow `topic` to `target` (or its baseline x `factor`); `dry_run` only validates."""

    topic: str
    target: int | None = None
    factor: int | None = None
    require_power_of_two: bool = True
    dry_run: bool = False


def _baseline(
    admin_count: int,
    request: ExpandRequest,
    record: ExpansionRecord | None,
    store: JobModelReader | None,
) -> tuple[int, str]:
    """The topic's count before the expansion, and where it came from."""
    if record is not None:
        before = record.plan.get("counts_before", {})
        if request.topic not in before:
            raise ExpansionError(
                f"expansion {record.expansion_id!r} does not grow topic {request.topic!r} (it "
                f"grows {', '.join(sorted(before)) or 'nothing'}) - pass one of those topics"
            )
        return int(before[request.topic]), f"expansion {record.expansion_id}"
    if store is not None:
        model = store.latest_job_model()
        if model is not None and request.topic in model.partition_counts():
            return model.partition_counts()[request.topic], f"job model v{model.version}"
    if request.factor is not None:
        log.warning(
            "factor=%s without expansion_id/job model: the baseline is the live count %d, so a "
            "retry after a successful growth would grow again - prefer target_partitions.",
            request.factor,
            admin_count,
        )
    return admin_count, "live count"


def expand(
    admin: KafkaAdmin,
    store: CoordinatorStore | None,
    request: ExpandRequest,
    *,
    expansion_id: str | None = None,
    lease: Lease | None = None,
) -> dict[str, Any]:
    """Grow the topic (module docstring); returns ``{topic, partitions_before,
    partitions_after, changed, dry_run, expansion_id}``. With an expansion, a topic already
    grown for it is never grown again, whatever this task asks."""
    topic = request.topic
    record = records.require(store, expansion_id) if (store and expansion_id) else None
    done = ExpandResult.of(record).topics.get(topic) if record is not None else None
    current = admin.partition_counts([topic])[topic]
    baseline, source = _baseline(current, request, record, store)
    target = _target(request, baseline, record)
    if not (source == "live count" and current == target):
        validate_growth(topic, baseline, target, require_power_of_two=request.require_power_of_two)
    result = {
        "topic": topic,
        "partitions_before": baseline,
        "partitions_after": target,
        "changed": False,
        "dry_run": bool(request.dry_run),
        "expansion_id": expansion_id,
    }
    if done is not None or current == target:
        log.info(
            "Topic %s has %d partitions (target %d, baseline %d from %s)%s: nothing to change.",
            topic,
            current,
            target,
            baseline,
            source,
            " and this expansion grew it already" if done is not None else "",
        )
        _begin(store, expansion_id, lease)
        _record(store, expansion_id, topic, target, applied=False, lease=lease)
        return result
    if current != baseline:
        raise InvalidGrowthError(
            f"topic {topic!r} has {current} partitions, but the expansion goes from {baseline} "
            f"({source}) to {target}: someone else changed the topic - plan the expansion again "
            "from the current state"
        )
    if record is not None and record.reached(ExpansionStatus.BARRIER_SNAPSHOT):
        raise InvalidTransitionError(
            f"expansion {record.expansion_id!r} is {record.status.value!r}: its barrier was "
            f"taken on {topic!r} at {current} partitions, so growing it now would place keys "
            "past the barrier - plan the expansion again from the current state"
        )
    if request.dry_run:
        admin.create_partitions(topic, target, validate_only=True)
        log.info(
            "Dry run: the broker accepts growing %s from %d to %d; not applied.",
            topic,
            current,
            target,
        )
        return result
    log.info("Growing topic %s from %d to %d partitions.", topic, current, target)
    _begin(store, expansion_id, lease)
    if store is not None and expansion_id:  # where the stale-placement scan starts
        evidence.record_scan_start(admin, store, expansion_id, lease=lease)
    _grow(admin, topic, target)
    _record(store, expansion_id, topic, target, applied=True, lease=lease)
    result["changed"] = True
    return result


def _target(request: ExpandRequest, baseline: int, record: ExpansionRecord | None) -> int:
    """The count asked for; with an expansion it must be the planned one (else a refusal)."""
    if request.target is not None:
        target = int(request.target)
    else:
        target = baseline * int(request.factor or 2)
    if record is not None:
        planned = int(record.plan.get("counts_after", {}).get(request.topic, target))
        if planned != target:
            raise InvalidGrowthError(
                f"expansion {record.expansion_id!r} plans {request.topic!r} at {planned} "
                f"partitions, but this task asks for {target} - use the planned count"
            )
    return target


def _grow(admin: KafkaAdmin, topic: str, target: int) -> None:
    """CreatePartitions; when it does not confirm, the count re-read decides."""
    try:
        admin.create_partitions(topic, target)
    except (KafkaUnavailableError, InvalidGrowthError) as exc:
        # A timeout may hide an applied growth; INVALID_PARTITIONS may mean a concurrent retry
        # applied it first. Either way the count decides.
        log.warning("CreatePartitions on %s did not confirm (%s); re-reading.", topic, exc)
        now = admin.partition_counts([topic])[topic]
        if now != target:
            log.error(
                "Topic %s still has %d partitions (target %d): failing for a retry.",
                topic,
                now,
                target,
            )
            raise
        log.info("Topic %s has %d partitions: the growth was applied.", topic, now)


def _begin(store: CoordinatorStore | None, expansion_id: str | None, lease: Lease | None) -> None:
    """The expand step's start, on its first call that gets past the refusals."""
    if store is not None and expansion_id:
        records.begin(store, expansion_id, "expand", fence=lease)


def _record(
    store: CoordinatorStore | None,
    expansion_id: str | None,
    topic: str,
    count: int,
    *,
    applied: bool,
    lease: Lease | None,
) -> None:
    if store is None or not expansion_id:
        return

    def change(record: ExpansionRecord) -> ExpansionRecord | None:
        expanded = dict(ExpandResult.of(record).topics)
        if topic in expanded:
            return None
        expanded[topic] = TopicGrown(count, now_iso(), applied)
        status = None
        if set(expanded) >= set(record.grown_counts()):  # a stream that stays is not waited for
            status = ExpansionStatus.EXPANDED
        return records.mark(record, "expand", status, result=ExpandResult(expanded).to_dict())

    records.update(store, expansion_id, change, fence=lease)


__all__ = ["ExpandRequest", "ExpandResult", "TopicGrown", "expand"]
