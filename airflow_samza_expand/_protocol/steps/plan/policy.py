"""The growth-policy step of the plan: measure each topic, decide the factor (`core.policy`).

Partition size counts only what was written since the topic last grew for this job (from the
completed expansion's barrier offsets): older records stay in the old partitions whatever the
count, so counting them would grow the topic again on every scheduled run until retention
removes them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.figures import measure_topic
from airflow_samza_expand.core._record import ExpansionStatus
from airflow_samza_expand.core.policy import GrowthDecision, GrowthPolicy, decide
from airflow_samza_expand.store import CoordinatorStore

log = logging.getLogger(__name__)


def offsets_since_last_growth(store: CoordinatorStore, topic: str) -> dict[int, int] | None:
    """Barrier offsets of `topic` in the newest completed expansion that grew it, or None."""
    for record in store.expansions():  # newest first
        grown = (record.plan or {}).get("streams_grown") or []
        if record.status != ExpansionStatus.COMPLETED or topic not in grown:
            continue
        offsets = (record.barrier or {}).get(topic)
        if offsets:
            return {int(p): int(o) for p, o in offsets.items()}
    return None


def policy_targets(
    store: CoordinatorStore,
    admin: KafkaAdmin,
    policy: GrowthPolicy,
    topics: Sequence[str],
    counts: Mapping[str, int],
    group: str,
) -> tuple[dict[str, int], list[GrowthDecision]]:
    """{topic: target} for the topics whose figures cross a threshold, and every decision."""
    targets: dict[str, int] = {}
    decisions: list[GrowthDecision] = []
    for topic in topics:
        since = offsets_since_last_growth(store, topic)
        figures = measure_topic(admin, topic, group, policy, since=since)
        decision = decide(policy, figures)
        log.info("growth policy: %s", decision.describe())
        decisions.append(decision)
        if decision.grow:
            targets[topic] = counts.get(topic, figures.partitions) * decision.factor
    return targets, decisions
