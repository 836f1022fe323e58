"""The start checks of a job that keeps its checkpoint (`runtime.Job.read_kafka`, Spark's Kafka
source): a job that ran on Spark's own Kafka source (``subscribe``, its own checkpoint) moves
onto the runtime by changing its source to ``job.read_kafka()`` and keeping the checkpoint -
Spark restores every key's state and every partition's offset. Before the query processes
anything, the checkpoint's offset log (`_protocol.job.spark_checkpoint`) is compared with the job
model; a checkpoint Spark would fail on, or run on with records skipped, is refused (exit 2,
nothing processed, the checkpoint untouched):

* several sources, or a source that is not Kafka (`check_sources`): the runtime's query reads
  one Kafka source, and Spark pairs offsets with sources by position;
* topics the job model does not read (`check_topics`: a ``subscribe`` of several topics, a
  ``subscribePattern`` that matched others): Spark fails ("partitions have been deleted"), or
  with ``failOnDataLoss=false`` never reads them again;
* partitions of a topic the job model lacks (`check_partitions`: a checkpoint ahead of the job
  model, the topic grown outside it): the same;
* ``spark.sql.streaming.queryEvolution.enableSourceEvolution`` recorded as on
  (`check_source_evolution`): Spark 4.2 restores it from the offset log and then demands a
  ``.name()`` for every source, naming the checkpoint's sources folder after it; the runtime's
  source has none, and the query fails as it starts.

Handled, not refused: partitions (or topics) of the job model the checkpoint has not read yet -
Spark's source starts them at their log start (`new_partitions`; what an expansion's restart
does too); such partitions below the job model's initial count grew with no barrier, which is
logged as a warning (`unordered_partitions`: per-key order at risk). A changed stateful
operator or state schema is Spark's own check: the first batch fails
(``STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA``,
``STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE``) before it writes output or state.

Each check is a pure function of the `CheckpointPosition` and the `JobModel`: the error's text,
or None.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator

from airflow_samza_expand._protocol.job.spark_checkpoint import (
    COMMITS,
    OFFSETS,
    SOURCE_EVOLUTION_CONF,
    CheckpointError,
    CheckpointPosition,
    batches,
    open_location,
    parse_offset_log,
    read_checkpoint,
)
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.spark._args import UsageError
from airflow_samza_expand.store._file_ops import FsspecFiles, LocalFiles

log = logging.getLogger("airflow_samza_expand.spark.runtime")

NEW_CHECKPOINT = (
    "a new checkpoint (its state starts empty; `samza-expand init-job --from-checkpoint` or "
    "`--from-group` gives its first run the old position)"
)


class CheckpointRefused(UsageError):
    """The job's checkpoint does not fit its job model (the message names the case and fix)."""


def check_sources(position: CheckpointPosition, model: JobModel) -> str | None:
    """One Kafka source: the runtime's query reads exactly one (`read_kafka`)."""
    if len(position.offsets) > 1:
        listed = "; ".join(s.describe() for s in position.offsets)
        return (
            f"{_where(position)} has {len(position.offsets)} sources ({listed}), but the job's "
            "query on the runtime reads one, job.read_kafka() (every stream of the job model in "
            "one Kafka source), and Spark pairs a checkpoint's offsets with the query's sources "
            "by position, so a query of several readStream sources (a union, a join) cannot "
            f"keep its checkpoint - give the job {NEW_CHECKPOINT}"
        )
    other = [s for s in position.offsets if s.kind == "other"]
    if other:
        return (
            f"{_where(position)} was written by a source that is not Spark's Kafka source "
            f"({other[0].describe()}); job.read_kafka() cannot go on from it - give the job "
            f"{NEW_CHECKPOINT}"
        )
    return None


def check_topics(position: CheckpointPosition, model: JobModel) -> str | None:
    """The checkpoint reads no topic the job model does not."""
    streams = set(model.partition_counts())
    extra = sorted(set(position.kafka_topics()) - streams)
    if not extra:
        return None
    return (
        f"{_where(position)} reads topic(s) {', '.join(extra)} that job model "
        f"v{model.version} of job {model.job_name!r} does not (it reads "
        f"{', '.join(sorted(streams))}): a subscribe of several topics or a subscribePattern "
        "that matched more. Spark would fail on them ('partitions have been deleted') or, with "
        "failOnDataLoss=false, never read them again - write the job model over every topic "
        "the job reads (samza-expand init-job --topic T for each, before the job's first run "
        f"on the runtime), or give the job {NEW_CHECKPOINT}"
    )


def check_partitions(position: CheckpointPosition, model: JobModel) -> str | None:
    """The checkpoint has read no partition the job model lacks (it is not ahead of it)."""
    counts = model.partition_counts()
    ahead = {
        topic: sorted(p for p in parts if p >= counts[topic])
        for source in position.offsets
        for topic, parts in (source.kafka or {}).items()
        if topic in counts and any(p >= counts[topic] for p in parts)
    }
    if not ahead:
        return None
    listed = "; ".join(
        f"{t}: partitions {', '.join(map(str, ps))} (job model v{model.version} reads "
        f"0-{counts[t] - 1})"
        for t, ps in sorted(ahead.items())
    )
    return (
        f"{_where(position)} has read partitions the job model lacks - {listed}: the topic "
        "grew outside the job model. Spark would fail on them ('partitions have been deleted') "
        "or, with failOnDataLoss=false, never read them again - take the growth into the job "
        "model first (an expansion DAG with follow_live_counts=True, or the event-driven DAG, "
        f"grows it to the topic's live count), or give the job {NEW_CHECKPOINT}"
    )


def check_source_evolution(position: CheckpointPosition, model: JobModel) -> str | None:
    """Spark 4.2's source evolution is off in the checkpoint (its sources are not named)."""
    if str(position.conf.get(SOURCE_EVOLUTION_CONF, "false")).lower() != "true":
        return None
    return (
        f"{_where(position)} was written with {SOURCE_EVOLUTION_CONF}=true: Spark restores "
        "that setting from the offset log (it cannot be turned off for a checkpoint) and then "
        "requires every source to be named as the checkpoint's sources/ folder names it, and "
        "job.read_kafka() reads an unnamed source, so the query would fail as it starts - "
        f"give the job {NEW_CHECKPOINT}"
    )


CHECKS = (check_sources, check_topics, check_partitions, check_source_evolution)


def new_partitions(position: CheckpointPosition, model: JobModel) -> dict[str, list[int]]:
    """The job model's partitions the checkpoint has not read: Spark starts them at their log
    start (handled, not refused)."""
    read = {t: set(ps) for s in position.offsets for t, ps in (s.kafka or {}).items()}
    fresh = {
        topic: [p for p in range(count) if p not in read.get(topic, set())]
        for topic, count in sorted(model.partition_counts().items())
    }
    return {t: ps for t, ps in fresh.items() if ps}


def unordered_partitions(position: CheckpointPosition, model: JobModel) -> dict[str, list[int]]:
    """The partitions new to the checkpoint that no expansion added (below the job model's
    initial count) on a topic it reads: the topic grew after the old job last read it, so
    keys moved with no barrier - a moved key's records still unread in its old partition and
    its new ones may land in different batches when the backlog takes more than one."""
    read = set(position.kafka_topics())
    initial = model.initial_counts()
    found = {
        topic: [p for p in parts if p < initial[topic]]
        for topic, parts in new_partitions(position, model).items()
        if topic in read
    }
    return {t: ps for t, ps in found.items() if ps}


def log_start(start: CheckpointPosition, model: JobModel) -> None:
    """Log the partitions Spark starts at their log start, and warn of the unordered ones."""
    if fresh := new_partitions(start, model):
        log.info("partitions new to checkpoint %s start at their log start: %s",
                 start.location, fresh)  # fmt: skip
    if unordered := unordered_partitions(start, model):
        log.warning(
            "checkpoint %s has not read partitions %s of job model v%d, which grew after the "
            "old job last read its topic (no expansion's barrier): a moved key's records still "
            "unread in its old partition and its new ones may land in different batches - "
            "per-key order is at risk while the backlog takes more than one batch",
            start.location, unordered, model.version,
        )  # fmt: skip


def problems(position: CheckpointPosition, model: JobModel) -> list[str]:
    """Every check's refusal for ``position``."""
    return [text for check in CHECKS if (text := check(position, model)) is not None]


def positions(location: str, files: LocalFiles | FsspecFiles) -> Iterator[CheckpointPosition]:
    """The checkpoint's last committed batch and, when newer, its batch in flight (Spark runs
    that one again first, on its recorded offsets); nothing for a fresh checkpoint."""
    newest = batches(files, OFFSETS)
    if not newest:
        return
    committed = read_checkpoint(location)
    if committed.last_committed_batch is not None:
        yield committed
    if committed.in_flight:
        batch = newest[-1]
        where = f"{location}/{OFFSETS}/{batch}"
        raw = files.read(OFFSETS, str(batch))
        if raw is None:
            raise CheckpointError(f"{where} vanished while it was read - is a query running on it?")
        version, conf, sources = parse_offset_log(raw.decode("utf-8"), where)
        yield dataclasses.replace(committed, offsets=sources, conf=conf, log_version=version,
                                  last_committed_batch=None)  # fmt: skip


def has_committed_batch(location: str) -> bool:
    """Whether the checkpoint has a committed batch (Spark goes on from it and ignores the
    source's ``startingOffsets``); False when it cannot be read."""
    try:
        files = open_location(location)
        return bool(set(batches(files, OFFSETS)) & set(batches(files, COMMITS)))
    except Exception:  # noqa: BLE001 - unreadable here (see check_checkpoint): as before
        return False


def check_checkpoint(location: str, model: JobModel) -> CheckpointPosition | None:
    """Refuse (`CheckpointRefused`) a checkpoint the job model cannot go on from; else the
    position Spark starts from (None for a fresh checkpoint, or one this process cannot read:
    a location with no fsspec backend or credentials here, which Spark may still reach)."""
    try:
        files = open_location(location)
        batches(files, OFFSETS)
    except Exception as exc:  # noqa: BLE001 - the checks are a safety net, not a gate
        log.warning("checkpoint %s cannot be read here (%s): starting without its checks",
                    location, exc)  # fmt: skip
        return None
    try:
        found = list(positions(location, files))
    except CheckpointError as exc:  # a checkpoint Spark would fail on too
        raise CheckpointRefused(f"{exc}") from None
    for start in found:
        refused = problems(start, model)
        if refused:
            raise CheckpointRefused(" | ".join(refused))
    return found[-1] if found else None


def _where(position: CheckpointPosition) -> str:
    batch = position.last_committed_batch
    newest = position.newest_offsets_batch
    which = f"batch {newest}, in flight" if batch is None else f"batch {batch}"
    return f"checkpoint {position.location!r} ({which})"


__all__ = [
    "CHECKS",
    "CheckpointRefused",
    "check_checkpoint",
    "check_partitions",
    "check_source_evolution",
    "check_sources",
    "check_topics",
    "has_committed_batch",
    "log_start",
    "new_partitions",
    "problems",
    "unordered_partitions",
]
