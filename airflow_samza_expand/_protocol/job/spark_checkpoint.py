"""Read the position of a Spark Structured Streaming checkpoint (a local path or an fsspec URL).

What Spark keeps under the checkpoint folder, and what is read here::

    metadata            {"id": "<query id>"}
    offsets/<N>         the offset log of batch N, written before the batch runs:
                          line 1 "v1" (or "v2": each source line is "<source name>:<offset>")
                          line 2 the batch's metadata JSON ({"batchWatermarkMs", "conf", ...})
                          then one line per source, in source order: its end offset as JSON,
                          or "-" for a source with no offset yet
    commits/<N>         written once batch N has finished (its output and state are durable)
    sources/<i>/0       source i's start offset (not needed here)

A batch is committed when both `offsets/N` and `commits/N` exist; a newer `offsets/N` without
`commits/N` is a batch in flight (Spark runs it again at the next start, from the committed
batch's end). Spark's Kafka source writes its offset as ``{"topic": {"partition": offset}}``
(the next offset to read of each partition), as the runtime's Python source does.

Pure reading: nothing is written; every fault is a `CheckpointError` naming the file and the fix.
"""

from __future__ import annotations

import json
import os
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from airflow_samza_expand.core.errors import ExpansionError
from airflow_samza_expand.store._file_ops import FsspecFiles, LocalFiles

OFFSETS, COMMITS, METADATA = "offsets", "commits", "metadata"
VOID_OFFSET = "-"  # Spark's line for a source with no offset yet
SOURCE_EVOLUTION_CONF = "spark.sql.streaming.queryEvolution.enableSourceEvolution"

Position = Mapping[str, Mapping[int, int]]


class CheckpointError(ExpansionError):
    """The checkpoint cannot be read, or holds no position of the kind asked for."""


@dataclass(frozen=True)
class SourceOffset:
    """One source's end offset in a batch. `kind`: "kafka" (``kafka`` holds the position),
    "none" (Spark wrote "-": the source had no offset yet) or "other" (any other source, or text
    that is not a Kafka position; ``raw`` keeps it). `name`: the source's name in a v2 log."""

    index: int
    kind: Literal["kafka", "other", "none"]
    raw: str
    kafka: Position | None = None
    name: str | None = None

    def describe(self) -> str:
        label = f"source {self.index}" + (f" ({self.name})" if self.name else "")
        if self.kind == "kafka" and self.kafka is not None:
            return f"{label}: Kafka {', '.join(sorted(self.kafka))}"
        return f"{label}: {'no offset yet' if self.kind == 'none' else 'not Kafka'} {self.raw!r}"


@dataclass(frozen=True)
class CheckpointPosition:
    """Where a checkpoint's query stands (module docstring)."""

    location: str
    last_committed_batch: int | None
    newest_offsets_batch: int | None
    offsets: tuple[SourceOffset, ...] = ()  # of the last committed batch
    conf: Mapping[str, str] = field(default_factory=dict)  # its offset log's "conf"
    query_id: str | None = None
    log_version: int = 1

    @property
    def in_flight(self) -> bool:
        """A batch has offsets but no commit yet (or only such batches exist)."""
        newest, last = self.newest_offsets_batch, self.last_committed_batch
        return newest is not None and (last is None or newest > last)

    def kafka_topics(self) -> tuple[str, ...]:
        """The topics the Kafka sources of the last committed batch read, sorted."""
        return tuple(sorted({t for s in self.offsets if s.kafka for t in s.kafka}))

    def kafka_position(self) -> dict[str, dict[int, int]]:
        """{topic: {partition: next offset}} of the last committed batch, all Kafka sources
        merged. CheckpointError when there is no committed batch, or two sources read one
        topic (e.g. a self-join: no single position)."""
        if self.last_committed_batch is None:
            raise CheckpointError(_no_commit(self))
        merged: dict[str, dict[int, int]] = {}
        for source in self.offsets:
            for topic, partitions in (source.kafka or {}).items():
                if topic in merged:
                    raise CheckpointError(
                        f"checkpoint {self.location!r}: topic {topic!r} is read by two sources "
                        "of the query, so it has no single position - give the position by "
                        "hand (a consumer group: --from-group)"
                    )
                merged[topic] = dict(partitions)
        return merged


def open_location(location: str) -> LocalFiles | FsspecFiles:
    """The checkpoint folder: a local path, a file:// URL or another fsspec URL."""
    parsed = urllib.parse.urlparse(location)
    if "://" in location and parsed.scheme not in ("", "file"):
        try:
            return FsspecFiles(location.rstrip("/"))
        except (ImportError, ValueError) as exc:
            raise CheckpointError(
                f"cannot open {location!r}: {exc} - install the fsspec filesystem of "
                f"{parsed.scheme}:// (e.g. pip install s3fs, gcsfs, adlfs) or give a local path"
            ) from None
    root = parsed.path if parsed.scheme == "file" else location
    return LocalFiles(os.path.abspath(os.path.expanduser(root)))


def batches(files: LocalFiles | FsspecFiles, folder: str) -> list[int]:
    """The batch numbers of a log folder (`offsets` or `commits`), ascending."""
    return sorted(int(n) for n in files.names(folder) if n.isdigit())


def read_checkpoint(location: str) -> CheckpointPosition:
    """The position of the checkpoint at `location` (module docstring). CheckpointError when it
    is no Spark checkpoint or its last committed offset log is unreadable."""
    files = open_location(location)
    try:
        last, newest = _batches(files, location)
        text = None if last is None else _read(files, location, OFFSETS, last)
        query_id = _query_id(files)
    except OSError as exc:  # no permission, no credentials, an unreachable store
        raise CheckpointError(
            f"cannot read checkpoint {location!r}: {exc} - check the path and the access "
            "(permissions, the filesystem's credentials) of whoever runs this"
        ) from None
    sources: tuple[SourceOffset, ...] = ()
    conf: dict[str, str] = {}
    version = 1
    if text is not None:
        version, conf, sources = parse_offset_log(text, f"{location}/{OFFSETS}/{last}")
    return CheckpointPosition(location, last, newest, sources, conf, query_id, version)


def watch_quiet(
    location: str, seen: CheckpointPosition, quiet_s: float, poll_s: float = 0.2
) -> CheckpointPosition | None:
    """Watch the checkpoint's logs for `quiet_s` seconds: the position (batches only, no
    offsets read) as soon as a batch newer than `seen`'s is logged or committed - a query still
    runs on it - else None."""
    files = open_location(location)
    deadline = time.monotonic() + max(0.0, quiet_s)
    while True:
        last, newest = _batches(files, location)
        if _newer(newest, seen.newest_offsets_batch) or _newer(last, seen.last_committed_batch):
            return CheckpointPosition(location, last, newest)
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        time.sleep(min(poll_s, left))


def _newer(batch: int | None, than: int | None) -> bool:
    return batch is not None and (than is None or batch > than)


def _batches(files: LocalFiles | FsspecFiles, location: str) -> tuple[int | None, int]:
    """(the last committed batch or None, the newest logged batch)."""
    offsets, commits = batches(files, OFFSETS), batches(files, COMMITS)
    if not offsets:
        what = "empty or missing" if not files.names() else "no offsets/ log"
        raise CheckpointError(
            f"{location!r} is not a Spark streaming checkpoint ({what}: Spark writes "
            "offsets/<batch> there from the query's first batch) - give the folder the query "
            "ran with as option checkpointLocation"
        )
    committed = sorted(set(offsets) & set(commits))
    return (committed[-1] if committed else None), offsets[-1]


def _read(files: LocalFiles | FsspecFiles, location: str, folder: str, batch: int) -> str:
    raw = files.read(folder, str(batch))
    if raw is None:
        raise CheckpointError(
            f"{location}/{folder}/{batch} vanished while it was read - Spark purged it (a query "
            "still runs on this checkpoint?): stop the query and read again"
        )
    return raw.decode("utf-8")


def parse_offset_log(text: str, where: str) -> tuple[int, dict[str, str], tuple[SourceOffset, ...]]:
    """(log version, the metadata's "conf", the sources' offsets) of one offset log file."""
    lines = text.split("\n")
    if len(lines) < 2 or lines[0].strip() not in ("v1", "v2"):
        head = lines[0][:20] if lines else ""
        raise CheckpointError(
            f"{where}: not a Spark offset log this reader knows (first line {head!r}, "
            "expected 'v1' or 'v2'; an incomplete file?) - stop the query, or move the job "
            "from its consumer group instead (--from-group)"
        )
    version = int(lines[0].strip()[1:])
    try:
        metadata = json.loads(lines[1]) if lines[1].strip() else {}
    except ValueError:
        raise CheckpointError(
            f"{where}: its metadata line is not JSON: {lines[1][:80]!r}"
        ) from None
    conf = metadata.get("conf") if isinstance(metadata, dict) else None
    conf = {str(k): str(v) for k, v in conf.items()} if isinstance(conf, dict) else {}
    sources = []
    for index, line in enumerate(x for x in lines[2:] if x.strip()):
        name = None
        if version == 2:
            name, _, line = line.partition(":")
        sources.append(_source(index, line.strip(), name))
    return version, conf, tuple(sources)


def _source(index: int, raw: str, name: str | None) -> SourceOffset:
    if raw == VOID_OFFSET:
        return SourceOffset(index, "none", raw, None, name)
    position = kafka_offset(raw)
    kind: Literal["kafka", "other"] = "kafka" if position is not None else "other"
    return SourceOffset(index, kind, raw, position, name)


def kafka_offset(raw: str) -> dict[str, dict[int, int]] | None:
    """``{"topic": {"partition": offset}}`` (Spark's Kafka source offset) as {topic: {partition:
    offset}}; None for any other text."""
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, dict) or not value:
        return None
    position: dict[str, dict[int, int]] = {}
    for topic, partitions in value.items():
        if not isinstance(partitions, dict) or not partitions:
            return None
        if not all(str(p).isdigit() and type(o) is int for p, o in partitions.items()):
            return None
        position[topic] = {int(p): o for p, o in sorted(partitions.items(), key=_partition)}
    return position


def _partition(item: tuple[str, int]) -> int:
    return int(item[0])


def _query_id(files: LocalFiles | FsspecFiles) -> str | None:
    raw = files.read(METADATA)
    try:
        found = json.loads(raw) if raw else None
    except ValueError:
        return None
    return str(found["id"]) if isinstance(found, dict) and "id" in found else None


def _no_commit(checkpoint: CheckpointPosition) -> str:
    return (
        f"checkpoint {checkpoint.location!r} has no committed batch: batch "
        f"{checkpoint.newest_offsets_batch} has offsets but no commits/"
        f"{checkpoint.newest_offsets_batch} (it was in flight when the query stopped), so no "
        "position is final - run the old job until it commits a batch and stop it cleanly, or "
        "start the job from its log start without --from-checkpoint"
    )


__all__ = [
    "COMMITS",
    "OFFSETS",
    "SOURCE_EVOLUTION_CONF",
    "CheckpointError",
    "CheckpointPosition",
    "SourceOffset",
    "batches",
    "kafka_offset",
    "open_location",
    "parse_offset_log",
    "read_checkpoint",
    "watch_quiet",
]
