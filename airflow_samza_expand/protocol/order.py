"""Proof of order (DESIGN.md rule 1.5) at the protocol level: plain functions over a coordinator
store and a Kafka admin, used by the expand step, the barrier poll, the submit step, the
restarted job and the report step. No Airflow import.

* `record_scan_start` - the expand step, right **before** CreatePartitions: the old partitions'
  end offsets, where the barrier's stale-placement scan starts.
* `order_poll` - the barrier poll, while it has no snapshot: scan what was appended to the old
  partitions since the last poll (bounded), log the held stale placements in one INFO line,
  keep the counts in the record's ``stale_placements`` and decide
  (`core.order.decide_snapshot`): wait, snapshot, or timeout.
* `job_order_args` - the submit step: the restarted job's ``--barrier-offsets``,
  ``--partitioner`` and ``--on-stale-placement``.
* `job_publisher` / `record_job_placements` - the restarted job: its counts of stale
  placements read beyond the barrier go into the record.
* `scan_after_snapshot` / `order_summary` - the report step: its own scan of the old
  partitions beyond the barrier, then ``order: proven ...`` / ``order: at risk ...`` and counts.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from airflow_samza_expand.core.clock import parse_iso, to_iso
from airflow_samza_expand.core.lease import Lease
from airflow_samza_expand.core.order import (
    DEFAULT_STALE_QUIET_S,
    BarrierDecision,
    OrderEvidence,
    check_on_stale_placement,
    decide_snapshot,
    order_report,
)
from airflow_samza_expand.core.record import ExpansionRecord
from airflow_samza_expand.core.stale import StalePlacement, StaleSummary
from airflow_samza_expand.kafka.admin import KafkaAdmin
from airflow_samza_expand.kafka.barrier import barrier_to_dict, snapshot_barrier
from airflow_samza_expand.kafka.stale_scan import StaleScanner
from airflow_samza_expand.protocol import records
from airflow_samza_expand.store import CoordinatorStore

log = logging.getLogger(__name__)

MAX_LOGGED_PER_POLL = 20  # stale placements after the snapshot: one warning each, up to this
HELD_EXAMPLES = 3  # example keys in the barrier's one line per poll about held placements
REPORT_SCAN_MAX_POLLS = 20  # x StaleScanner's 10,000 records per poll


def _update(
    store: CoordinatorStore, expansion_id: str, change: Any, lease: Lease | None
) -> ExpansionRecord:
    return records.update(store, expansion_id, change, fence=lease)


def _evidence(record: ExpansionRecord) -> OrderEvidence:
    return OrderEvidence.from_dict(record.stale_placements)


def _with_evidence(record: ExpansionRecord, evidence: OrderEvidence) -> ExpansionRecord:
    return dataclasses.replace(record, stale_placements=evidence.to_dict())


def growths(record: ExpansionRecord) -> dict[str, tuple[int, int]]:
    """Stream -> (count before, count after) for the streams the expansion grows. A stream the
    job reads that stays (the other side of a join) has no stale placements, no barrier and
    no order check: it is read on as before."""
    before, after = record.plan["counts_before"], record.plan["counts_after"]
    counts = {t: (int(n), int(after.get(t, n))) for t, n in before.items()}
    return {t: (n, m) for t, (n, m) in sorted(counts.items()) if m != n}


def old_counts(record: ExpansionRecord) -> dict[str, int]:
    """The old partition counts of the streams that grow (the barrier's partitions)."""
    return {t: n for t, (n, _) in growths(record).items()}


def detected_partitioners(record: ExpansionRecord) -> list[str] | None:
    """The partitioner(s) the plan's conformance check detected; None when it saw no keyed
    record or did not run (the scan then accepts either default partitioner)."""
    conformance = (record.results.get("plan") or {}).get("conformance") or {}
    found = sorted(
        {str(r["partitioner"]) for r in conformance.values() if r and r.get("partitioner")}
    )
    return found or None


# -- the expand step -------------------------------------------------------------------------


def record_scan_start(
    admin: KafkaAdmin, store: CoordinatorStore, expansion_id: str, *, lease: Lease | None = None
) -> OrderEvidence:
    """Store the old partitions' end offsets as the scan's start, once (a rerun keeps the first).
    Call it right before CreatePartitions: a record placed with the old count before the growth
    is then counted as held by the barrier, never missed."""
    record = store.get_expansion(expansion_id)
    if record is not None and _evidence(record).scan_start:
        return _evidence(record)
    offsets = snapshot_barrier(admin, old_counts(record)) if record is not None else {}

    def change(current: ExpansionRecord) -> ExpansionRecord | None:
        evidence = _evidence(current)
        if evidence.scan_start:
            return None
        partitioner = tuple(detected_partitioners(current) or ())
        started = OrderEvidence(partitioner=partitioner, scan_start=offsets)
        return _with_evidence(current, started)

    return _evidence(_update(store, expansion_id, change, lease))


# -- the barrier poll --------------------------------------------------------------------------


@dataclass(frozen=True)
class OrderPoll:
    """One look before the snapshot: the decision and what the scan found this time."""

    decision: BarrierDecision
    evidence: OrderEvidence
    found: tuple[StalePlacement, ...]
    records_read: int


def order_poll(
    admin: KafkaAdmin,
    store: CoordinatorStore,
    kafka_config: Mapping[str, str],
    *,
    expansion_id: str,
    expanded_at: float,
    grace_ends: float,
    deadline: float | None,
    quiet_s: float = DEFAULT_STALE_QUIET_S,
    lease: Lease | None = None,
    scanner: StaleScanner | None = None,
    now: float | None = None,
) -> OrderPoll:
    """Scan (bounded) what was appended to the old partitions since the last poll, store the
    counts, decide whether the barrier may snapshot. Call it only while there is no snapshot.

    Without a scan start (the expansion was done outside the expand step) the scan starts at
    the current end offsets: earlier placements are not seen (logged as a warning).
    """
    now = datetime.now(UTC).timestamp() if now is None else now
    stamp = to_iso(datetime.fromtimestamp(now, UTC))
    record = store.get_expansion(expansion_id)
    if record is None:
        raise ValueError(f"no expansion record {expansion_id!r} - run the plan step first")
    evidence = _evidence(record)
    if not evidence.scan_start:
        log.warning(
            "expansion %s has no scan start (expanded outside the expand step): checking for "
            "stale placements from the current end offsets on",
            expansion_id,
        )
        record_scan_start(admin, store, expansion_id, lease=lease)
        evidence = _evidence(store.get_expansion(expansion_id))  # type: ignore[arg-type]
    positions = evidence.scan_positions or evidence.scan_start
    own = scanner is None
    scanner = scanner or StaleScanner(
        kafka_config, growths(record), list(evidence.partitioner) or None, admin=admin
    )
    try:
        result = scanner.poll(positions)
    finally:
        if own:
            scanner.close()

    def change(current: ExpansionRecord) -> ExpansionRecord | None:
        latest = _evidence(current)
        if current.barrier or latest.scan_positions != evidence.scan_positions:
            return None  # a concurrent poll stored its scan (or the snapshot) first
        return _with_evidence(
            current, latest.with_scan(result.positions, list(result.placements), stamp)
        )

    if result.placements or result.positions != positions:
        stored = _evidence(_update(store, expansion_id, change, lease))
    else:
        stored = evidence
    if result.placements:
        log.info("expansion %s: %s", expansion_id, _held_line(result.placements, stored))
    last = stored.last_stale_at
    decision = decide_snapshot(
        now=now,
        expanded_at=expanded_at,
        grace_ends=grace_ends,
        deadline=deadline,
        quiet_s=quiet_s,
        last_stale_at=parse_iso(last).timestamp() if last else None,
        stale_records=stored.before_snapshot.records,
        caught_up=result.caught_up,
        backlog=result.backlog(),
    )
    return OrderPoll(decision, stored, result.placements, result.records_read)


def _held_line(found: tuple[StalePlacement, ...], stored: OrderEvidence) -> str:
    """One poll's held stale placements as one line: counts per partition and a few keys.

    Held before the snapshot, they put nothing at risk (the job reads them before the new
    partitions), so the barrier logs one INFO line per poll, never one warning per record.
    """
    this_poll = StaleSummary().add(found)
    per_partition: dict[str, int] = {}
    for placement in found:
        name = f"{placement.topic}[{placement.partition}]"
        per_partition[name] = per_partition.get(name, 0) + 1
    examples = ", ".join(
        f"{p.key!r} {p.topic}[{p.partition}]@{p.offset} -> {p.expected_partition}"
        for p in found[:HELD_EXAMPLES]
    )
    return (
        f"{this_poll.records} stale placement(s) of {this_poll.key_count()} key(s) held by the "
        f"barrier (before the snapshot: order not at risk; {stored.before_snapshot.records} so "
        f"far) in {', '.join(f'{n} x{c}' for n, c in sorted(per_partition.items()))}; "
        f"e.g. {examples}"
    )


# -- submit, job, report -------------------------------------------------------------------------


def job_order_args(record: ExpansionRecord, on_stale_placement: str = "warn") -> list[str]:
    """The restarted job's order-check arguments (empty without a barrier snapshot)."""
    check_on_stale_placement(on_stale_placement)
    if not record.barrier:
        return []
    args = ["--barrier-offsets", json.dumps(barrier_to_dict(record.barrier), sort_keys=True)]
    partitioners = detected_partitioners(record) or list(_evidence(record).partitioner)
    if len(partitioners) == 1:
        args += ["--partitioner", partitioners[0]]
    return [*args, "--on-stale-placement", on_stale_placement]


def record_job_placements(
    store: CoordinatorStore, expansion_id: str, summary: StaleSummary
) -> ExpansionRecord:
    """Store the restarted job's counts (``after_snapshot``) in the expansion record."""

    def change(current: ExpansionRecord) -> ExpansionRecord | None:
        evidence = _evidence(current)
        if evidence.after_snapshot == summary:
            return None
        return _with_evidence(current, evidence.with_job_placements(summary))

    return _update(store, expansion_id, change, None)


def job_publisher(store: Any, job_model_version: int) -> Callable[[StaleSummary], None] | None:
    """For the job: publish into the record of the expansion that made its job model
    (``target_version``); None when there is none or the store has no typed records."""
    if not hasattr(store, "expansions"):
        return None
    made = [r for r in store.expansions() if r.target_version == job_model_version]
    if not made:
        return None
    expansion_id = made[0].expansion_id
    if not isinstance(store.get_expansion(expansion_id), ExpansionRecord):
        return None  # a legacy (dict) store view

    def publish(summary: StaleSummary) -> None:
        record_job_placements(store, expansion_id, summary)

    return publish


def stale_counts(record: ExpansionRecord) -> dict[str, int]:
    """``{stale_before_snapshot, stale_after_snapshot}`` for step results and progress lines."""
    evidence = _evidence(record)
    return {
        "stale_before_snapshot": evidence.before_snapshot.records,
        "stale_after_snapshot": evidence.after_snapshot.records,
    }


def scan_after_snapshot(
    admin: KafkaAdmin, record: ExpansionRecord, *, max_polls: int = REPORT_SCAN_MAX_POLLS
) -> StaleSummary | None:
    """The report step's own look: stale placements in the old partitions from the barrier
    snapshot up to their end offsets now - records the restarted job reads (or already read)
    beyond the barrier, whether or not its check has reached them yet. None without a
    snapshot; bounded (``max_polls`` scanner polls; a scan not caught up counts what it read,
    logged)."""
    if not record.barrier:
        return None
    barrier = {t: {int(p): int(o) for p, o in ps.items()} for t, ps in record.barrier.items()}
    until = snapshot_barrier(admin, old_counts(record))
    partitioners = detected_partitioners(record) or list(_evidence(record).partitioner) or None
    found: list[StalePlacement] = []
    positions: Mapping[str, Mapping[int, int]] = barrier
    with StaleScanner(admin.config, growths(record), partitioners, admin=admin) as scanner:
        for _ in range(max_polls):
            result = scanner.poll(positions, until=until)
            found.extend(result.placements)
            positions = result.positions
            if result.caught_up:
                break
        else:
            log.warning(
                "expansion %s: the report's stale-placement scan stopped after %d polls at %s "
                "(end offsets %s); the restarted job's own check covers the rest",
                record.expansion_id, max_polls, dict(positions), until,
            )  # fmt: skip
    for placement in found[:MAX_LOGGED_PER_POLL]:
        log.warning(
            "expansion %s: %s (after the snapshot: order at risk)",
            record.expansion_id,
            placement.describe(),
        )
    return StaleSummary().add(found)


def order_summary(record: ExpansionRecord, scanned: StaleSummary | None = None) -> dict[str, Any]:
    """The report step's ``order`` (its ``line`` is the report's ``order:`` line): after the
    snapshot, the larger of the restarted job's published count and ``scanned``
    (`scan_after_snapshot`: the same range up to the report)."""
    evidence = _evidence(record)
    after = evidence.after_snapshot
    if scanned is not None and scanned.records > after.records:
        after = scanned
    return order_report(evidence.before_snapshot, after)


__all__ = [
    "OrderPoll",
    "detected_partitioners",
    "job_order_args",
    "job_publisher",
    "order_poll",
    "order_summary",
    "record_job_placements",
    "record_scan_start",
    "scan_after_snapshot",
    "stale_counts",
]
