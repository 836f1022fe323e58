"""The restarted job's order check: stale placements beyond the barrier.

Why: docs/design.md 'Stale placements'.

After an expansion the barrier snapshot ``H[p]`` of every old partition is the last offset the
old job model read. A record the restarted job reads from an old partition at or beyond
``H[p]`` whose key belongs elsewhere at the new count was placed by a producer with stale
metadata *after* the snapshot: that key's order is at risk (its newer records in the new
partition may be processed before it). The check counts them per key, logs each one, writes
the running summary to the progress file, hands it to ``publish`` (the expansion record) and,
with ``--on-stale-placement fail``, stops the job.

It runs on the driver after each committed batch, over exactly the committed range of the old
partitions. Where the job reads with the provider's reader the counts come from the job's own
micro-batches (`spark._stale_batch`: the executors count the raw key bytes of what they read and
report per range); the driver re-reads (``StaleScanner.poll(until=...)``) only a range no
report covers (Spark's own Kafka source; executors without the driver's filesystem). Each
``order`` line says which source counted. The check is on when the job is given
``--barrier-offsets``, and after a switch in place to a job model an expansion made
(`order_check_after_switch`: that expansion's snapshot, like a restarted job's ``auto``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from airflow_samza_expand.core._order import ON_STALE_PLACEMENT, order_line
from airflow_samza_expand.core._stale import StaleSummary
from airflow_samza_expand.core.errors import ExpansionError
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.spark._stale_batch import StaleRule, committed_until, count_range

if TYPE_CHECKING:
    from airflow_samza_expand.store import CoordinatorStore
    from airflow_samza_expand.store._roles import ExpansionReader

log = logging.getLogger("airflow_samza_expand.spark._stale")

Offsets = dict[str, dict[int, int]]
BATCHES = "the job's micro-batches"
SCAN = "a separate scan"
PARTITIONER_CHOICES = ("murmur2", "crc32")


class StalePlacementError(ExpansionError):
    """``--on-stale-placement fail`` and a stale placement was read after the barrier."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The job's order-check options."""
    parser.add_argument(
        "--barrier-offsets",
        default=None,
        type=_barrier_argument,
        metavar="JSON|@FILE|auto",
        help="barrier snapshot {topic: {old partition: offset}} of the expansion that made this "
        "job model: check the records read beyond it for stale placements; 'auto': "
        "take it (and the detected partitioner) from that expansion's record in --coordinator",
    )
    parser.add_argument(
        "--partitioner",
        choices=PARTITIONER_CHOICES,
        default=None,
        help="partitioner the plan detected (default: a record is stale only if neither "
        "murmur2 nor crc32 places its key in its partition)",
    )
    parser.add_argument(
        "--on-stale-placement",
        choices=ON_STALE_PLACEMENT,
        default="warn",
        help="warn: count, log and report each stale placement (default); fail: stop the job",
    )


def parse_barrier_offsets(text: str) -> Offsets:
    """``{"orders": {"0": 12, "1": 9}}`` (or ``@path`` of a file holding it); ValueError naming
    the problem and the fix."""
    source = "--barrier-offsets"
    if text.startswith("@"):
        source = f"--barrier-offsets file {text[1:]!r}"
        try:
            with open(text[1:], encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise ValueError(f"{source} cannot be read: {exc} - give a readable file") from None
    try:
        doc = json.loads(text)
        offsets = {
            str(t): {int(p): int(o) for p, o in dict(ps).items()} for t, ps in dict(doc).items()
        }
    except (ValueError, TypeError, AttributeError):
        raise ValueError(
            f"{source} is not a JSON object of topic -> {{partition: offset}} - pass the "
            'barrier snapshot of the expansion record, e.g. \'{"orders": {"0": 12}}\''
        ) from None
    for topic, partitions in offsets.items():
        if sorted(partitions) != list(range(len(partitions))) or not partitions:
            raise ValueError(
                f"{source}: topic {topic!r} must list old partitions 0..N-1, got "
                f"{sorted(partitions)}"
            )
        if any(o < 0 for o in partitions.values()):
            raise ValueError(f"{source}: topic {topic!r} has a negative offset")
    return offsets


def _barrier_argument(text: str) -> Offsets | str:
    if text == "auto":
        return text
    try:
        return parse_barrier_offsets(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def growths_of(
    barrier: Mapping[str, Mapping[int, int]], model: JobModel
) -> dict[str, tuple[int, int]]:
    """topic -> (old count = partitions in the barrier, new count = the job model's count)."""
    counts = model.partition_counts()
    out = {}
    for topic, partitions in sorted(barrier.items()):
        if topic not in counts:
            raise ValueError(
                f"--barrier-offsets names topic {topic!r}, which job model v{model.version} does "
                "not read - pass the barrier of the expansion that made this job model"
            )
        out[topic] = (len(partitions), counts[topic])
    return out


class OrderCheck:
    """Checks the committed ranges of the old partitions beyond the barrier, batch by batch."""

    def __init__(
        self,
        scanner: Any,  # protocol.barrier.stale_scan.StaleScanner
        barrier: Mapping[str, Mapping[int, int]],
        *,
        on_stale: str = "warn",
        progress_file: str | None = None,
        publish: Callable[[StaleSummary], None] | None = None,
        rule: StaleRule | None = None,
    ) -> None:
        self.scanner = scanner
        self.rule = rule  # the reader's rule: reports of the job's batches (spark._stale_batch)
        self.checked = {BATCHES: 0, SCAN: 0}  # records checked beyond the barrier, per source
        self.positions: Offsets = {t: dict(ps) for t, ps in barrier.items()}
        self.on_stale = on_stale
        self.progress_file = progress_file
        self.publish = publish
        self.summary = StaleSummary()
        # a store opened for `publish`, closed with the check
        self.owned_store: CoordinatorStore | None = None

    def after_commit(self, end_offsets: Mapping[str, Mapping[Any, int]]) -> StaleSummary:
        """Check ``[position, committed end)`` of every old partition; the running summary.

        Raises `StalePlacementError` with ``fail`` once a stale placement is found.
        """
        until = committed_until(self.positions, end_offsets)
        if until == self.positions:
            return self.summary
        step = count_range(self.rule, self.positions, until, lambda: self.scanner)
        self.positions = step.reached
        self.checked[BATCHES] += step.covered
        self.checked[SCAN] += step.rescanned
        counted, found = step.counted, list(step.found)
        if not found and not counted.records:
            return self.summary
        for placement in [*counted.examples, *found]:
            log.warning(
                "order at risk - %s (read after the barrier snapshot)", placement.describe()
            )
        self.summary = self.summary.merge(counted).add(found)
        line = order_line(StaleSummary(), self.summary)
        log.warning("%s (counted by %s)", line, self.counted_by())
        self._record(line)
        if self.on_stale == "fail":
            raise StalePlacementError(
                f"{line} - stopping (--on-stale-placement fail): a producer kept the old "
                "partition count after the barrier snapshot; refresh its metadata (lower "
                "metadata.max.age.ms / topic.metadata.refresh.interval.ms) or raise the "
                "expansion's producer_refresh_grace_s, then restart the job"
            )
        return self.summary

    def counted_by(self) -> str:
        """Which source counted the records checked so far (the order report says it)."""
        used = [f"{what} ({n} records)" for what, n in self.checked.items() if n]
        return " and ".join(used) or "nothing yet"

    def _record(self, line: str) -> None:
        doc = {
            "stale_placements": self.summary.to_dict(),
            "order": line,
            "counted_by": dict(self.checked),
        }
        if self.progress_file:
            with open(self.progress_file, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(doc, sort_keys=True) + "\n")
        if self.publish is not None:
            try:
                self.publish(self.summary)
            except Exception as exc:  # the check goes on; the log and progress file have it
                log.error("could not publish the stale placement counts: %s", exc)

    def close(self) -> None:
        self.scanner.close()
        if self.owned_store is not None:
            self.owned_store.close()


def order_check_from_args(
    args: argparse.Namespace,
    model: JobModel,
    kafka_config: Mapping[str, str],
    store: CoordinatorStore | None = None,
    report_dir: str | None = None,
) -> OrderCheck | None:
    """The job's check, or None without ``--barrier-offsets``; ValueError on bad input.

    The counts also go into the record of the expansion that made the job model
    (``_protocol.barrier.evidence.job_publisher``) through ``store``, by default a typed store of
    its own on ``--coordinator`` (the job's other store is shared between threads). ``report_dir``:
    where the provider's reader reports the counts of the job's batches (the check's `rule`).
    """
    if not getattr(args, "barrier_offsets", None):
        return None
    from airflow_samza_expand._protocol.barrier.evidence import job_publisher
    from airflow_samza_expand._protocol.barrier.stale_scan import StaleScanner

    owned = None
    if store is None:
        from airflow_samza_expand.store import open_store

        store = owned = open_store(args.coordinator, args.job_name, kafka_config)
    barrier, partitioner = args.barrier_offsets, args.partitioner
    if barrier == "auto":
        barrier, partitioner = _from_record(store, model, partitioner)
        if barrier is None:
            log.info("no expansion made job model v%d: no order check", model.version)
            if owned is not None:
                owned.close()
            return None
    elif isinstance(barrier, str):
        barrier = parse_barrier_offsets(barrier)
    scanner = StaleScanner(kafka_config, growths_of(barrier, model), partitioner)
    publish = job_publisher(store, model.version)
    rule = stale_rule(model, barrier, partitioner, report_dir) if report_dir else None
    log.info(
        "order check on: records read beyond barrier %s are checked for stale placements "
        "(partitioner %s, on stale placement: %s; counted in %s; counts go to %s)",
        json.dumps(barrier, sort_keys=True),
        partitioner or "murmur2 or crc32",
        args.on_stale_placement,
        "the job's micro-batches where the provider's reader reports them, else by a separate scan"
        if rule
        else "a separate scan (re-read by the driver)",
        "the expansion record" if publish else "the log and progress file only",
    )
    progress = getattr(args, "progress_file", None)
    check = OrderCheck(
        scanner,
        barrier,
        on_stale=args.on_stale_placement,
        progress_file=os.path.abspath(progress) if progress else None,
        publish=publish,
        rule=rule,
    )
    check.owned_store = owned
    return check


def stale_rule(
    model: JobModel,
    barrier: Mapping[str, Mapping[int, int]],
    partitioner: str | None,
    report_dir: str,
) -> StaleRule:
    """The reader's rule for counting in the job's batches (`spark._stale_batch`)."""
    counts = model.partition_counts()
    return StaleRule(
        version=model.version,
        report_dir=report_dir,
        check_from={t: dict(ps) for t, ps in barrier.items()},
        new_counts={t: counts[t] for t in barrier},
        partitioners=(partitioner,) if partitioner else None,
    )


def switch_rule(
    store: ExpansionReader, model: JobModel, partitioner: str | None, report_dir: str
) -> str | None:
    """`spark._switch.SwitchPublisher`'s ``rule_for``: the rule (JSON) of the expansion that
    made ``model``, None when none did."""
    barrier, partitioner = _from_record(store, model, partitioner)
    if barrier is None:
        return None
    return stale_rule(model, barrier, partitioner, report_dir).to_json()


def order_check_after_switch(
    args: argparse.Namespace,
    model: JobModel,
    kafka_config: Mapping[str, str],
    report_dir: str,
    previous: OrderCheck | None,
) -> OrderCheck | None:
    """After a switch in place to ``model``: the check of the expansion that made it (as a
    restarted job's ``--barrier-offsets auto`` would have), replacing ``previous``."""
    if previous is not None:
        previous.close()
    auto = argparse.Namespace(**{**vars(args), "barrier_offsets": "auto"})
    return order_check_from_args(auto, model, kafka_config, report_dir=report_dir)


def _from_record(
    store: ExpansionReader, model: JobModel, partitioner: str | None
) -> tuple[Any, Any]:
    """(barrier, partitioner) of the expansion that made ``model`` (None, None: none has)."""
    from airflow_samza_expand._protocol.barrier.evidence import detected_partitioners

    made = [
        r
        for r in (store.expansions() if hasattr(store, "expansions") else [])
        if r.target_version == model.version and r.barrier
    ]
    if not made:
        return None, None
    barrier = {t: {int(p): int(o) for p, o in ps.items()} for t, ps in made[0].barrier.items()}
    detected = detected_partitioners(made[0]) or []
    return barrier, partitioner or (detected[0] if len(detected) == 1 else None)


__all__ = [
    "OrderCheck",
    "StalePlacementError",
    "add_arguments",
    "growths_of",
    "order_check_after_switch",
    "order_check_from_args",
    "stale_rule",
    "switch_rule",
    "parse_barrier_offsets",
]
