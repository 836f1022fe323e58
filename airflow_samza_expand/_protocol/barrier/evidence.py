"""Proof of order (docs/design.md 'Stale placements') at the protocol level: plain functions over a
coordinator store and a Kafka admin, used by the expand step, the barrier poll, the submit step, the
restarted job and the report step. No Airflow import.

* `record_scan_start` - the expand step, right **before** CreatePartitions: the old partitions'
  end offsets, where the barrier's stale-placement scan starts.
* `scan_before_snapshot` - the barrier poll (`_protocol.barrier.before_snapshot.order_poll`), while
  it has no snapshot: scan what was appended to the old partitions since the last poll
  (bounded), log the held stale placements in one INFO line, keep the counts in
  ``stale_placements``; `take_job_count` instead takes the count the job's own processor
  published (`spark._stale_before`) when it has one.
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
from typing import Any

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._protocol import records
from airflow_samza_expand._protocol.barrier.reads import barrier_to_dict, snapshot_barrier
from airflow_samza_expand._protocol.barrier.rule import JobCoverage, job_coverage, next_target
from airflow_samza_expand._protocol.barrier.stale_scan import ScanResult, StaleScanner
from airflow_samza_expand.core._lease import Lease
from airflow_samza_expand.core._order import (
    JobStaleCount,
    OrderEvidence,
    check_on_stale_placement,
    order_report,
)
from airflow_samza_expand.core._record import ExpansionRecord
from airflow_samza_expand.core._stale import StalePlacement, StaleSummary
from airflow_samza_expand.store import CoordinatorStore

log = logging.getLogger(__name__)

MAX_LOGGED_PER_POLL = 20  # stale placements after the snapshot: one warning each, up to this
HELD_EXAMPLES = 3  # example keys in the barrier's one line per poll about held placements
REPORT_SCAN_MAX_POLLS = 20  # x StaleScanner's 10,000 records per poll


def update_record(
    store: CoordinatorStore, expansion_id: str, change: Any, lease: Lease | None
) -> ExpansionRecord:
    return records.update(store, expansion_id, change, fence=lease)


def evidence_of(record: ExpansionRecord) -> OrderEvidence:
    """The record's proof of order so far (scan start, positions, stale placements)."""
    return OrderEvidence.from_dict(record.stale_placements)


def with_evidence(record: ExpansionRecord, evidence: OrderEvidence) -> ExpansionRecord:
    """`record` holding `evidence`."""
    return dataclasses.replace(record, stale_placements=evidence.to_dict())


def growths(record: ExpansionRecord) -> dict[str, tuple[int, int]]:
    """Stream -> (count before, count after) for the streams the expansion grows. A stream the
    job reads that stays (the other side of a join) has no stale placements, no barrier and
    no order check: it is read on as before."""
    return record.grown_counts()


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
    if record is not None and evidence_of(record).scan_start:
        return evidence_of(record)
    offsets = snapshot_barrier(admin, old_counts(record)) if record is not None else {}

    def change(current: ExpansionRecord) -> ExpansionRecord | None:
        evidence = evidence_of(current)
        if evidence.scan_start:
            return None
        partitioner = tuple(detected_partitioners(current) or ())
        started = OrderEvidence(partitioner=partitioner, scan_start=offsets)
        return with_evidence(current, started)

    return evidence_of(update_record(store, expansion_id, change, lease))


# -- the barrier's scan before the snapshot (the decision: `_protocol.barrier.step`) -------------


def scan_before_snapshot(
    admin: KafkaAdmin,
    store: CoordinatorStore,
    kafka_config: Mapping[str, str],
    expansion_id: str,
    stamp: str,
    *,
    lease: Lease | None = None,
    scanner: StaleScanner | None = None,
) -> tuple[OrderEvidence, ScanResult]:
    """Scan (bounded) what was appended to the old partitions since the last poll; store the
    positions and the held placements (once, against concurrent polls) and log them in one
    INFO line. Returns the evidence as stored and this scan.

    Without a scan start (the expansion was done outside the expand step) the scan starts at
    the current end offsets: earlier placements are not seen (logged as a warning).
    """
    record = store.get_expansion(expansion_id)
    if record is None:
        raise ValueError(f"no expansion record {expansion_id!r} - run the plan step first")
    evidence = evidence_of(record)
    if not evidence.scan_start:
        log.warning(
            "expansion %s has no scan start (expanded outside the expand step): checking for "
            "stale placements from the current end offsets on",
            expansion_id,
        )
        record_scan_start(admin, store, expansion_id, lease=lease)
        evidence = evidence_of(store.get_expansion(expansion_id))  # type: ignore[arg-type]
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
        latest = evidence_of(current)
        if current.barrier or latest.scan_positions != evidence.scan_positions:
            return None  # a concurrent poll stored its scan (or the snapshot) first
        scanned = latest.with_scan(result.positions, list(result.placements), stamp)
        return with_evidence(current, scanned.with_ends(result.highs))

    stored = evidence
    if result.placements or result.positions != positions or evidence.seen_ends != result.highs:
        stored = evidence_of(update_record(store, expansion_id, change, lease))
    if result.placements:
        log.info("expansion %s: %s", expansion_id, _held_line(result.placements, stored))
    return stored, result


def take_job_count(
    admin: KafkaAdmin,
    store: CoordinatorStore,
    expansion_id: str,
    count: JobStaleCount,
    *,
    lease: Lease | None = None,
) -> tuple[OrderEvidence, JobCoverage]:
    """The barrier's look from a processor's own count (`spark._stale_before`) instead of a
    scan: read the old partitions' end offsets (one ListOffsets), take the count when it covers
    what the evidence holds (`core._order.job_coverage`) and store it with ``counted_by`` the
    job; log newly held placements in one INFO line. The evidence as stored and the coverage."""
    record = records.require(store, expansion_id)
    evidence = evidence_of(record)
    ends = snapshot_barrier(admin, old_counts(record))

    def coverage_of(current: OrderEvidence) -> JobCoverage:
        covered = current.scan_positions or current.scan_start
        return job_coverage(count.checked, covered, current.seen_ends or None, ends)

    def change(current: ExpansionRecord) -> ExpansionRecord | None:
        latest = evidence_of(current)
        if current.barrier:
            return None  # the snapshot is taken: the look before it is over
        seen = coverage_of(latest)
        out = latest.with_ends(next_target(seen, latest.seen_ends, ends))
        if seen.usable:
            out = out.with_job_count(count)
        return None if out == latest else with_evidence(current, out)

    coverage = coverage_of(evidence)
    stored = evidence_of(update_record(store, expansion_id, change, lease))
    new = stored.before_snapshot.records - evidence.before_snapshot.records
    if new > 0:
        shown = _examples(stored.before_snapshot.examples)
        log.info(
            "expansion %s: %d stale placement(s) held by the barrier (before the snapshot: "
            "order not at risk; %d of %s key(s) so far, counted by %s); e.g. %s",
            expansion_id, new, stored.before_snapshot.records,
            stored.before_snapshot.key_count(), stored.counted_by, shown,
        )  # fmt: skip
    return stored, coverage


def _examples(placements: tuple[StalePlacement, ...]) -> str:
    """A few held placements for the barrier's one line: key, where it landed, where it goes."""
    return ", ".join(
        f"{p.key!r} {p.topic}[{p.partition}]@{p.offset} -> {p.expected_partition}"
        for p in placements[:HELD_EXAMPLES]
    )


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
    examples = _examples(found)
    return (
        f"{this_poll.records} stale placement(s) of {this_poll.key_count()} key(s) held by the "
        f"barrier (before the snapshot: order not at risk; {stored.before_snapshot.records} so "
        f"far, counted by {stored.counted_by}) in "
        f"{', '.join(f'{n} x{c}' for n, c in sorted(per_partition.items()))}; e.g. {examples}"
    )


# -- submit, job, report -------------------------------------------------------------------------


def job_order_args(record: ExpansionRecord, on_stale_placement: str = "warn") -> list[str]:
    """The restarted job's order-check arguments (empty without a barrier snapshot)."""
    check_on_stale_placement(on_stale_placement)
    if not record.barrier:
        return []
    args = ["--barrier-offsets", json.dumps(barrier_to_dict(record.barrier), sort_keys=True)]
    partitioners = detected_partitioners(record) or list(evidence_of(record).partitioner)
    if len(partitioners) == 1:
        args += ["--partitioner", partitioners[0]]
    return [*args, "--on-stale-placement", on_stale_placement]


def record_job_placements(
    store: CoordinatorStore, expansion_id: str, summary: StaleSummary
) -> ExpansionRecord:
    """Store the restarted job's counts (``after_snapshot``) in the expansion record."""

    def change(current: ExpansionRecord) -> ExpansionRecord | None:
        evidence = evidence_of(current)
        if evidence.after_snapshot == summary:
            return None
        return with_evidence(current, evidence.with_job_placements(summary))

    return update_record(store, expansion_id, change, None)


def job_publisher(
    store: CoordinatorStore, job_model_version: int
) -> Callable[[StaleSummary], None] | None:
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
    evidence = evidence_of(record)
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
    partitioners = detected_partitioners(record) or list(evidence_of(record).partitioner) or None
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
    evidence = evidence_of(record)
    after = evidence.after_snapshot
    if scanned is not None and scanned.records > after.records:
        after = scanned
    return order_report(evidence.before_snapshot, after)


__all__ = [
    "MAX_LOGGED_PER_POLL",
    "detected_partitioners",
    "evidence_of",
    "job_order_args",
    "job_publisher",
    "order_summary",
    "record_job_placements",
    "record_scan_start",
    "scan_before_snapshot",
    "take_job_count",
    "scan_after_snapshot",
    "growths",
    "old_counts",
    "stale_counts",
    "update_record",
    "with_evidence",
]
