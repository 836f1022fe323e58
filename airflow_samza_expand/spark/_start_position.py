"""Where a fresh checkpoint starts: the job's consumer group's committed offsets.

A job moved onto the runtime keeps its place: its first query (no offsets in the checkpoint
yet) starts each partition of the job model at the offset its consumer group committed
(``--consumer-group``, or the group ``samza-expand init-job --from-group`` copied the position
into), and at the partition's log start where the group committed nothing. A committed offset
that retention has deleted since starts at the log start (logged): the records are gone.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from airflow_samza_expand._kafka.admin import KafkaAdmin

log = logging.getLogger("airflow_samza_expand.spark._start_position")

Starts = dict[str, dict[int, int | None]]


def group_start_offsets(
    config: Mapping[str, str], group: str, counts: Mapping[str, int], timeout_s: float = 30.0
) -> Starts:
    """{topic: {partition: first offset to read, or None: nothing committed}} of ``group`` over
    partitions ``0..count-1`` of each topic in ``counts``."""
    wanted = {topic: list(range(count)) for topic, count in counts.items()}
    admin = KafkaAdmin(config, timeout_s=timeout_s)
    try:
        committed = admin.group_offsets(group, wanted)
        if not any(o is not None for ps in committed.values() for o in ps.values()):
            return committed
        lows = admin.low_watermarks(wanted)
    finally:
        admin.close()
    starts: Starts = {}
    for topic, parts in committed.items():
        starts[topic] = {}
        for partition, offset in parts.items():
            low = lows[topic][partition]
            if offset is not None and offset < low:
                log.warning(
                    "group %r committed offset %d of %s[%d], before its log start %d (deleted "
                    "by retention): starting at %d", group, offset, topic, partition, low, low,
                )  # fmt: skip
                offset = low
            starts[topic][partition] = offset
    return starts


__all__ = ["Starts", "group_start_offsets"]
