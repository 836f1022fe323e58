"""Where a job that moves onto the runtime starts: the position `init-job` copies into the job's
consumer group, from the group the old job used (`--from-group`) or from its Spark checkpoint
(`--from-checkpoint`), and the checks that the old job has stopped.

Every refusal is `InitJobRefused`, raised before anything is written: the old job still runs
(live members in its group, live processors of a runtime job on that group, a checkpoint whose
query still writes batches), the checkpoint has no committed batch, reads other topics or
partitions than the job, or is not on Spark's Kafka source, or the job's group already holds
another position.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._protocol.job.spark_checkpoint import (
    CheckpointError,
    CheckpointPosition,
    read_checkpoint,
    watch_quiet,
)
from airflow_samza_expand.core._liveness import WORKING_STATES, statuses
from airflow_samza_expand.core.errors import ExpansionError

log = logging.getLogger(__name__)

Position = dict[str, dict[int, int]]


class InitJobRefused(ExpansionError):
    """The job cannot be initialised as asked; nothing was written (the message says why)."""


@dataclass(frozen=True)
class Adoption:
    """The position to start from, where it came from, and whether to commit it to the job's
    group (not when the group holds it already: a rerun)."""

    source: str  # "group G" / "checkpoint DIR (batch N)"
    position: Position
    copy: bool


def committed(offsets: Mapping[str, Mapping[int, int | None]]) -> Position:
    """The committed offsets only ({topic: {partition: offset}}, topics with none left out)."""
    kept = {t: {p: o for p, o in ps.items() if o is not None} for t, ps in sorted(offsets.items())}
    return {t: ps for t, ps in kept.items() if ps}


def from_group(
    admin: KafkaAdmin, old_group: str, group: str, counts: Mapping[str, int]
) -> Adoption:
    """`old_group`'s committed offsets on the topics (refused while it has live members)."""
    members = admin.group_members(old_group)
    if members:
        raise InitJobRefused(
            f"consumer group {old_group!r} has {len(members)} live member(s) ({', '.join(members)})"
            " - the old job still runs, and both jobs would read the topics; nothing written. "
            "Stop the old job (all its consumers), check the group is empty "
            f"(kafka-consumer-groups.sh --describe --group {old_group} --members) and rerun"
        )
    wanted = {topic: list(range(count)) for topic, count in counts.items()}
    position = committed(admin.group_offsets(old_group, wanted))
    if not position:
        raise InitJobRefused(
            f"consumer group {old_group!r} has committed no offset on {sorted(counts)} - "
            "nothing written. Give the group the existing job commits to (kafka-consumer-groups.sh "
            "--list); a Spark job on its own Kafka source commits none: give its checkpoint "
            "(--from-checkpoint DIR) instead"
        )
    if old_group == group:
        return Adoption(f"group {old_group}", position, False)  # the job goes on with its group
    return Adoption(f"group {old_group}", position, _copy(admin, group, position, old_group))


def from_checkpoint(
    admin: KafkaAdmin, location: str, group: str, counts: Mapping[str, int], quiet_s: float
) -> Adoption:
    """The Kafka offsets of the checkpoint's last committed batch, once no newer batch has
    appeared for `quiet_s` (a query still writing to it is refused)."""
    try:
        checkpoint = read_checkpoint(location)
        position = _checkpoint_position(checkpoint, counts)
        log.info(
            "checkpoint %s: batch %s committed; watching %g s for a newer batch (a query that "
            "still writes to it)", location, checkpoint.last_committed_batch, quiet_s,
        )  # fmt: skip
        newer = watch_quiet(location, checkpoint, quiet_s)
    except CheckpointError as exc:
        raise InitJobRefused(f"{exc}; nothing written") from None
    if newer is not None:
        raise InitJobRefused(
            f"checkpoint {location!r} is still written: batch {newer.newest_offsets_batch} "
            f"appeared (last committed {newer.last_committed_batch}) while init-job read "
            f"batch {checkpoint.last_committed_batch} - a query still runs on it; nothing "
            "written. Stop the old job (query.stop(), or stop its application), then rerun; a "
            "job with a trigger interval longer than --quiet-s needs --quiet-s above it"
        )
    label = f"checkpoint {location} (batch {checkpoint.last_committed_batch})"
    return Adoption(label, position, _copy(admin, group, position, label))


def _checkpoint_position(checkpoint: CheckpointPosition, counts: Mapping[str, int]) -> Position:
    where = f"checkpoint {checkpoint.location!r}"
    if checkpoint.last_committed_batch is None:
        checkpoint.kafka_position()  # raises: only a batch in flight, no committed batch
    others = [s.describe() for s in checkpoint.offsets if s.kind != "kafka"]
    if others:
        raise InitJobRefused(
            f"{where}: {'; '.join(others)} - --from-checkpoint takes the position of a query "
            "that reads Spark's own Kafka source only; nothing written. Move a job on another "
            "source from its consumer group (--from-group), or start it without a position"
        )
    position = checkpoint.kafka_position()
    if sorted(position) != sorted(counts):
        raise InitJobRefused(
            f"{where} reads topic(s) {sorted(position)}, not the --topic given "
            f"{sorted(counts)}; nothing written. Name the topics the old job read (--topic, "
            "repeated), or give the checkpoint of the job that reads these topics"
        )
    for topic, count in sorted(counts.items()):
        if sorted(position[topic]) != list(range(count)):
            raise InitJobRefused(
                f"{where} holds partitions {sorted(position[topic])} of {topic!r}, which has "
                f"{count} today; nothing written. Run the old job until it commits a batch "
                "that reads every partition (Spark's Kafka source picks new ones up), stop it "
                "and rerun"
            )
    return {t: dict(sorted(ps.items())) for t, ps in sorted(position.items())}


def _copy(admin: KafkaAdmin, group: str, position: Position, source: str) -> bool:
    """True when `group` holds no position yet (copy it); False when it holds this one (a
    rerun); InitJobRefused when it holds another."""
    wanted = {topic: list(partitions) for topic, partitions in position.items()}
    held = committed(admin.group_offsets(group, wanted))
    if held == position:
        return False
    if held:
        raise InitJobRefused(
            f"the job's consumer group {group!r} already holds a position ({held}), not "
            f"{source}'s ({position}) - nothing written. The job has run already: keep its "
            "position, or reset the group (kafka-consumer-groups.sh --reset-offsets) first"
        )
    return True


def live_processors(processors: Mapping[str, Mapping[str, Any]], group: str, job: str) -> list[str]:
    """Live, working processors (heartbeats of a job's coordinator store) that commit to
    `group` (a processor that names no group commits to its job's name, `job`), described."""
    return sorted(
        s.describe()
        for s in statuses(processors).values()
        if s.alive() and s.state in WORKING_STATES and (s.consumer_group or job) == group
    )


def refuse_live_processors(found: list[str], group: str, job: str) -> None:
    """InitJobRefused naming the runtime processors that still commit to `group`."""
    if found:
        raise InitJobRefused(
            f"consumer group {group!r} is the group of runtime job {job!r}, whose processors "
            f"still run: {', '.join(found)} - nothing written. Stop that job "
            f"(samza-expand stop, or stop its application) and rerun once they stopped"
        )


__all__ = [
    "Adoption",
    "InitJobRefused",
    "committed",
    "from_checkpoint",
    "from_group",
    "live_processors",
    "refuse_live_processors",
]
