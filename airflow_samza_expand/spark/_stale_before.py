"""The proof of order (docs/design.md 'Stale placements') before the snapshot, in the job: stale
placements counted in the records the running processor reads anyway, for the barrier (instead of
its own re-read of the old partitions).

While an expansion of the job is in progress (grown, its record has a scan start - the old
partitions' end offsets at the growth - and no barrier snapshot yet) and the processor reads
the expansion's old partitions with the provider's reader, `BeforeSnapshotCount`:

* `poll` (the driver's store cadence): finds that expansion and publishes its `StaleRule`
  (``check_from`` = the scan start, the new counts, the detected partitioner) in a file the
  reader polls at each micro-batch's planning (`spark._stale_batch.RuleFile`); the executors
  then count and report per range, as for the order check after the snapshot;
* `after_commit` (after each committed batch): takes the reports that chain from its checked
  positions up to the committed offsets (`take_reports`; a replayed range is never counted
  twice), re-reads only a range no report covers (a batch planned before the rule, a restart)
  and publishes a `core._order.JobStaleCount` through the coordinator store (kind
  ``stale-count``, key: the expansion id): checked positions, counts, when it last found one.

A restarted processor resumes from the published count. The barrier takes it when the job's
live active processor advertises ``counts-stale`` (`_protocol.barrier.before_snapshot`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_samza_expand._protocol.barrier.evidence import (
    detected_partitioners,
    evidence_of,
    growths,
)
from airflow_samza_expand.core._clock import now_iso
from airflow_samza_expand.core._order import JobStaleCount
from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.spark._stale_batch import StaleRule, committed_until, count_range
from airflow_samza_expand.spark._switch import write_atomically

if TYPE_CHECKING:
    from airflow_samza_expand.store import CoordinatorStore

log = logging.getLogger("airflow_samza_expand.spark._stale_before")

OVER = frozenset({ExpansionStatus.FAILED, ExpansionStatus.COMPLETED})


def in_progress(records: Sequence[ExpansionRecord], version: int) -> ExpansionRecord | None:
    """The newest expansion growing job model ``version`` whose growth is done (the expand step
    ended, or the barrier began: grown outside the expand step), with a scan start and no
    barrier snapshot yet (the barrier looks for stale placements before its snapshot)."""
    for record in records:  # newest first
        expand = record.steps.get("expand")
        grown = bool(expand and expand.ended_at) or "barrier_snapshot" in record.steps
        if (
            record.base_version == version
            and grown
            and record.status not in OVER
            and not record.barrier
            and evidence_of(record).scan_start
            and growths(record)
        ):
            return record
    return None


def before_rule(record: ExpansionRecord, version: int, report_dir: str) -> StaleRule:
    """The reader's rule for counting ``record``'s stale placements from its scan start."""
    evidence = evidence_of(record)
    grown = growths(record)
    partitioners = detected_partitioners(record) or list(evidence.partitioner)
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", record.expansion_id)
    return StaleRule(
        version=version,
        report_dir=os.path.join(report_dir, "before", safe),
        check_from={t: dict(evidence.scan_start[t]) for t in grown},
        new_counts={t: new for t, (_old, new) in grown.items()},
        partitioners=tuple(partitioners) or None,
    )


class BeforeSnapshotCount:
    """The processor's count before an expansion's snapshot (module docstring)."""

    def __init__(
        self,
        store: CoordinatorStore,
        store_lock: Any,
        processor_id: str,
        kafka_config: Mapping[str, str],
        report_dir: str,
        rule_path: str,
    ) -> None:
        self.store = store
        self.lock = store_lock
        self.processor_id = processor_id
        self.kafka_config = dict(kafka_config)
        self.report_dir = report_dir
        self.rule_path = rule_path
        self.rule: StaleRule | None = None
        self.count: JobStaleCount | None = None
        self.growths: dict[str, tuple[int, int]] = {}
        # protocol.barrier.stale_scan.StaleScanner for ranges no report covers
        self._scanner: Any = None

    def poll(self, model: JobModel, committed: Mapping[str, Mapping[Any, int]] | None) -> None:
        """Start counting an expansion of ``model`` in progress; stop once it has a snapshot."""
        if not hasattr(self.store, "expansions"):
            return
        with self.lock:
            record = in_progress(self.store.expansions(), model.version)
        current = self.count.expansion_id if self.count else None
        wanted = record.expansion_id if record else None
        if wanted == current:
            return
        if current is not None:
            self._stop()
        if record is not None:
            self._start(record, model)
            self.after_commit(committed or {}, publish=True)

    def _start(self, record: ExpansionRecord, model: JobModel) -> None:
        self.rule = before_rule(record, model.version, self.report_dir)
        self.growths = growths(record)
        with self.lock:
            published = self.store.stale_count(record.expansion_id)
        if published is not None and set(published.checked) == set(self.rule.check_from):
            self.count = dataclasses.replace(
                published, processor_id=self.processor_id, job_model_version=model.version
            )
        else:
            start = {t: dict(ps) for t, ps in self.rule.check_from.items()}
            self.count = JobStaleCount(
                record.expansion_id, self.processor_id, model.version, checked=start
            )
        write_atomically(self.rule_path, self.rule.to_json())
        log.info(
            "expansion %s in progress: counting stale placements in this job's batches from %s "
            "(for the barrier, before its snapshot; resuming at %s)",
            record.expansion_id,
            dict(self.rule.check_from),
            dict(self.count.checked),
        )

    def _stop(self) -> None:
        assert self.rule is not None and self.count is not None
        log.info(
            "expansion %s: the barrier has its snapshot (or the expansion ended): this job's "
            "count before it stops at %s (%d stale placements)",
            self.count.expansion_id,
            dict(self.count.checked),
            self.count.summary.records,
        )
        write_atomically(self.rule_path, "")
        shutil.rmtree(self.rule.directory(), ignore_errors=True)
        self.rule, self.count = None, None
        self.close()  # its scanner reads this expansion's old partitions, not the next one's

    def after_commit(self, end: Mapping[str, Mapping[Any, int]], publish: bool = False) -> None:
        """Count ``[checked, committed end)`` of every old partition (reports, else a re-read)
        and publish the count when it moved (or ``publish``)."""
        if self.rule is None or self.count is None:
            return
        checked = {t: dict(ps) for t, ps in self.count.checked.items()}
        until = committed_until(checked, end)
        if until == checked and not publish:
            return
        step = count_range(self.rule, checked, until, self._scanner_of)
        counted, found, reached = step.counted, list(step.found), step.reached
        covered, rescanned = step.covered, step.rescanned
        summary = self.count.summary.merge(counted).add(found)
        stamp = now_iso()
        self.count = dataclasses.replace(
            self.count,
            checked=reached,
            summary=summary,
            last_stale_at=stamp
            if summary.records > self.count.summary.records
            else self.count.last_stale_at,
            updated_at=stamp,
            records=self.count.records + covered + rescanned,
            rescanned=self.count.rescanned + rescanned,
        )
        try:
            with self.lock:
                self.store.put_stale_count(self.count)
        except Exception as exc:  # noqa: BLE001 - the next batch publishes again
            log.warning("could not publish the count of stale placements: %s", exc)

    def _scanner_of(self) -> Any:
        """The scanner (created on first use) for ranges no report covers."""
        if self._scanner is None:
            from airflow_samza_expand._protocol.barrier.stale_scan import StaleScanner

            assert self.rule is not None
            partitioners = list(self.rule.partitioners or ()) or None
            self._scanner = StaleScanner(self.kafka_config, self.growths, partitioners)
        return self._scanner

    def close(self) -> None:
        if self._scanner is not None:
            self._scanner.close()
            self._scanner = None


__all__ = ["BeforeSnapshotCount", "before_rule", "in_progress"]
