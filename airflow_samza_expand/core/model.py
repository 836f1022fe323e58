"""The versioned job model (SSP -> task mapping) with its JSON codec.

JSON layout of a job model (``to_json`` writes it with sorted keys and compact separators, so
``JobModel.from_json(text).to_json() == text`` for every text that ``to_json`` wrote)::

    {
      "broadcast": [["kafka", "config", 0]],          # SSPs read by every task (often empty)
      "created_at": "2026-11-22T01:02:03Z",           # ISO-8601 UTC, second precision or finer
      "created_by": "airflow-samza-expand",
      "expansion_algorithm": "airflow_samza_expand.core.expansion.Default...",  # dotted path
      "format": 1,                                    # layout version of this document
      "grouper": "GroupByPartitionFixedTasks",
      "job_name": "orders-counter",
      "streams": [                                    # sorted by (system, stream)
        {"current": 4, "initial": 2, "stream": "orders", "system": "kafka"}
      ],
      "tasks": {                                      # task name -> its SSPs, sorted
        "Partition 0": [["kafka", "orders", 0], ["kafka", "orders", 2]],
        "Partition 1": [["kafka", "orders", 1], ["kafka", "orders", 3]]
      },
      "version": 2
    }

Every partition ``0 .. current-1`` of every stream is in exactly one task, or is broadcast.
Broadcast SSPs are listed once under ``"broadcast"``, not under each task.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from airflow_samza_expand.core._clock import now_iso as utc_now_iso  # kept importable here
from airflow_samza_expand.core._ssp import (
    StreamPartitionCounts,
    SystemStreamPartition,
    bad_field,
    decode_ssp,
    decode_streams,
    mapping_from_groups,
    no_duplicate_keys,
    pretty_json,
    require_positive_int,
    require_str,
    require_timestamp,
)
from airflow_samza_expand.core.errors import InvalidJobModelError
from airflow_samza_expand.core.groupers import grouper_by_name

FORMAT_VERSION = 1
DEFAULT_SYSTEM = "kafka"
DEFAULT_CREATED_BY = "airflow-samza-expand"
DEFAULT_GROUPER = "GroupByPartitionFixedTasks"
DEFAULT_EXPANSION_ALGORITHM = (
    "airflow_samza_expand.core.expansion.DefaultPartitionExpansionAlgorithm"
)

_TOP_LEVEL_FIELDS = frozenset(
    {
        "broadcast",
        "created_at",
        "created_by",
        "expansion_algorithm",
        "format",
        "grouper",
        "job_name",
        "streams",
        "tasks",
        "version",
    }
)


@dataclass(frozen=True)
class JobModel:
    """Version ``N`` of a job's SSP -> task mapping and the facts needed to compute ``N+1``."""

    version: int
    job_name: str
    streams: tuple[StreamPartitionCounts, ...]
    ssp_to_task: Mapping[SystemStreamPartition, str]
    grouper: str = DEFAULT_GROUPER
    expansion_algorithm: str = DEFAULT_EXPANSION_ALGORITHM
    created_at: str = field(default_factory=utc_now_iso)
    created_by: str = DEFAULT_CREATED_BY
    broadcast_ssps: frozenset[SystemStreamPartition] = frozenset()

    def __post_init__(self) -> None:
        require_positive_int(self.version, "version")
        require_str(self.job_name, "job_name")
        require_str(self.grouper, "grouper")
        require_str(self.expansion_algorithm, "expansion_algorithm")
        require_timestamp(self.created_at, "created_at")
        require_str(self.created_by, "created_by")
        streams = tuple(sorted(self.streams))
        object.__setattr__(self, "streams", streams)
        mapping = dict(sorted(dict(self.ssp_to_task).items()))
        object.__setattr__(self, "ssp_to_task", MappingProxyType(mapping))
        object.__setattr__(self, "broadcast_ssps", frozenset(self.broadcast_ssps))
        self._validate()

    def _validate(self) -> None:
        counts: dict[tuple[str, str], int] = {}
        for i, s in enumerate(self.streams):
            if not isinstance(s, StreamPartitionCounts):
                raise bad_field(f"streams[{i}]", f"must be a StreamPartitionCounts, got {s!r}")
            require_str(s.system, f"streams[{i}].system")
            require_str(s.stream, f"streams[{i}].stream")
            require_positive_int(s.current, f"streams[{i}].current")
            require_positive_int(s.initial, f"streams[{i}].initial")
            if s.current < s.initial or s.current % s.initial:
                raise bad_field(
                    f"streams[{i}].current",
                    f"({s.current}) of stream '{s.stream}' must be a multiple of its initial "
                    f"count ({s.initial}): partition counts only grow by multiples",
                )
            if any(name == s.stream for _, name in counts):
                raise bad_field(
                    f"streams[{i}]",
                    f"repeats stream name '{s.stream}': stream names must be unique in a job",
                )
            counts[(s.system, s.stream)] = s.current
        if not self.ssp_to_task:
            raise bad_field("tasks", "must map at least one SSP to a task")
        seen: set[SystemStreamPartition] = set()
        for ssp, task in self.ssp_to_task.items():
            self._check_ssp(ssp, counts, "tasks")
            require_str(task, f"tasks (task of {ssp})")
            seen.add(ssp)
        for ssp in self.broadcast_ssps:
            self._check_ssp(ssp, counts, "broadcast")
            if ssp in seen:
                raise bad_field("broadcast", f"lists {ssp}, which is also in a task; give it once")
            seen.add(ssp)
        for (system, stream), current in counts.items():
            missing = [
                p for p in range(current) if SystemStreamPartition(system, stream, p) not in seen
            ]
            if missing:
                raise bad_field(
                    "tasks",
                    f"leaves partitions {missing[:10]} of stream '{stream}' (count {current}) "
                    "without a task: map every partition to a task or to 'broadcast'",
                )

    @staticmethod
    def _check_ssp(ssp: Any, counts: Mapping[tuple[str, str], int], field_name: str) -> None:
        if not isinstance(ssp, SystemStreamPartition):
            raise bad_field(field_name, f"must hold SystemStreamPartitions, got {ssp!r}")
        current = counts.get((ssp.system, ssp.stream))
        if current is None:
            raise bad_field(
                field_name,
                f"names {ssp} of stream '{ssp.stream}', which is not in 'streams': "
                "add the stream with its partition counts",
            )
        if (
            isinstance(ssp.partition, bool)
            or not isinstance(ssp.partition, int)
            or not 0 <= ssp.partition < current
        ):
            raise bad_field(
                field_name,
                f"names partition {ssp.partition!r} of stream '{ssp.stream}', beyond its "
                f"partition count {current} (valid: 0..{current - 1})",
            )

    def __hash__(self) -> int:
        return hash(self.to_json())

    # -- views ---------------------------------------------------------------------------------

    def task_to_ssps(self) -> dict[str, frozenset[SystemStreamPartition]]:
        """Task name -> its SSPs (broadcast SSPs included in every task), tasks sorted."""
        grouped: dict[str, set[SystemStreamPartition]] = {}
        for ssp, task in self.ssp_to_task.items():
            grouped.setdefault(task, set()).add(ssp)
        return {task: frozenset(grouped[task] | self.broadcast_ssps) for task in sorted(grouped)}

    def partition_counts(self) -> dict[str, int]:
        """Stream name -> current partition count."""
        return {s.stream: s.current for s in self.streams}

    def initial_counts(self) -> dict[str, int]:
        """Stream name -> partition count when the job first ran."""
        return {s.stream: s.initial for s in self.streams}

    def stream(self, name: str) -> StreamPartitionCounts:
        """The counts of one stream by name; `InvalidJobModelError` naming the known ones."""
        for s in self.streams:
            if s.stream == name:
                return s
        known = ", ".join(s.stream for s in self.streams)
        raise InvalidJobModelError(
            f"job '{self.job_name}' has no stream '{name}' (its streams: {known})"
        )

    def tasks(self) -> list[str]:
        """Sorted task names."""
        return sorted(set(self.ssp_to_task.values()))

    def content_equals(self, other: object) -> bool:
        """Equal but for version, created_at and created_by."""
        if not isinstance(other, JobModel):
            return False
        return (
            self.job_name == other.job_name
            and self.streams == other.streams
            and dict(self.ssp_to_task) == dict(other.ssp_to_task)
            and self.broadcast_ssps == other.broadcast_ssps
            and self.grouper == other.grouper
            and self.expansion_algorithm == other.expansion_algorithm
        )

    # -- JSON codec ----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The JSON document as plain dicts and lists (layout in the module docstring)."""
        tasks: dict[str, list[list[Any]]] = {}
        for ssp, task in self.ssp_to_task.items():
            tasks.setdefault(task, []).append([ssp.system, ssp.stream, ssp.partition])
        return {
            "broadcast": [[s.system, s.stream, s.partition] for s in sorted(self.broadcast_ssps)],
            "created_at": self.created_at,
            "created_by": self.created_by,
            "expansion_algorithm": self.expansion_algorithm,
            "format": FORMAT_VERSION,
            "grouper": self.grouper,
            "job_name": self.job_name,
            "streams": [
                {"current": s.current, "initial": s.initial, "stream": s.stream, "system": s.system}
                for s in self.streams
            ],
            "tasks": {task: sorted(tasks[task]) for task in sorted(tasks)},
            "version": self.version,
        }

    def to_json(self) -> str:
        """Canonical JSON: sorted keys, compact separators, ASCII only."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, doc: Any) -> JobModel:
        """Decode a document of the layout in the module docstring; errors name the field."""
        if not isinstance(doc, dict):
            raise InvalidJobModelError(f"job model must be a JSON object, got {type(doc).__name__}")
        missing = sorted(_TOP_LEVEL_FIELDS - {"broadcast"} - doc.keys())
        if missing:
            raise bad_field(missing[0], "is missing")
        unknown = sorted(doc.keys() - _TOP_LEVEL_FIELDS)
        if unknown:
            raise bad_field(unknown[0], "is not a job model field (remove it)")
        if doc["format"] != FORMAT_VERSION or isinstance(doc["format"], bool):
            raise bad_field(
                "format", f"must be {FORMAT_VERSION}, got {doc['format']!r} (unsupported layout)"
            )
        streams = decode_streams(doc["streams"])
        tasks = doc["tasks"]
        if not isinstance(tasks, dict):
            raise bad_field("tasks", f"must be an object of task name -> SSP list, got {tasks!r}")
        ssp_to_task: dict[SystemStreamPartition, str] = {}
        for task, ssps in tasks.items():
            where = f"tasks[{task!r}]"
            require_str(task, where)
            if not isinstance(ssps, list) or not ssps:
                raise bad_field(where, f"must be a non-empty list of SSPs, got {ssps!r}")
            for j, raw in enumerate(ssps):
                ssp = decode_ssp(raw, f"{where}[{j}]")
                if ssp in ssp_to_task:
                    raise bad_field(
                        f"{where}[{j}]",
                        f"repeats {ssp}, already in task '{ssp_to_task[ssp]}': "
                        "an SSP belongs to exactly one task",
                    )
                ssp_to_task[ssp] = task
        raw_broadcast = doc.get("broadcast", [])
        if not isinstance(raw_broadcast, list):
            raise bad_field("broadcast", f"must be a list of SSPs, got {raw_broadcast!r}")
        broadcast = [decode_ssp(raw, f"broadcast[{j}]") for j, raw in enumerate(raw_broadcast)]
        if len(set(broadcast)) != len(broadcast):
            raise bad_field("broadcast", "repeats an SSP")
        return cls(
            version=require_positive_int(doc["version"], "version"),
            job_name=require_str(doc["job_name"], "job_name"),
            streams=streams,
            ssp_to_task=ssp_to_task,
            grouper=require_str(doc["grouper"], "grouper"),
            expansion_algorithm=require_str(doc["expansion_algorithm"], "expansion_algorithm"),
            created_at=require_timestamp(doc["created_at"], "created_at"),
            created_by=require_str(doc["created_by"], "created_by"),
            broadcast_ssps=frozenset(broadcast),
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> JobModel:
        """Decode ``to_json`` output (any whitespace); `InvalidJobModelError` names the field."""
        if isinstance(text, bytes | bytearray):
            try:
                text = bytes(text).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InvalidJobModelError(f"job model is not UTF-8 text: {exc}") from None
        try:
            doc = json.loads(text, object_pairs_hook=no_duplicate_keys)
        except json.JSONDecodeError as exc:
            raise InvalidJobModelError(
                f"job model is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            ) from None
        return cls.from_dict(doc)

    # -- construction --------------------------------------------------------------------------

    @classmethod
    def initial(
        cls,
        job_name: str,
        partition_counts: Mapping[str, int],
        *,
        system: str = DEFAULT_SYSTEM,
        grouper: str = DEFAULT_GROUPER,
        created_by: str = DEFAULT_CREATED_BY,
        created_at: str | None = None,
        expansion_algorithm: str = DEFAULT_EXPANSION_ALGORITHM,
    ) -> JobModel:
        """Version 1 of a job reading ``partition_counts`` (stream -> count) of one system."""
        if not partition_counts:
            raise InvalidJobModelError(
                f"job '{job_name}' needs at least one input stream - give stream=count"
            )
        streams = []
        for name, count in sorted(partition_counts.items()):
            require_str(name, "streams[].stream")
            require_positive_int(count, f"streams[{name!r}].current")
            streams.append(StreamPartitionCounts(system, name, count, count))
        ssps = [
            SystemStreamPartition(s.system, s.stream, p) for s in streams for p in range(s.current)
        ]
        groups = grouper_by_name(grouper).group(ssps)
        return cls(
            version=1,
            job_name=job_name,
            streams=tuple(streams),
            ssp_to_task=mapping_from_groups(groups),
            grouper=grouper,
            expansion_algorithm=expansion_algorithm,
            created_at=created_at or utc_now_iso(),
            created_by=created_by,
        )


__all__ = [
    "DEFAULT_EXPANSION_ALGORITHM",
    "DEFAULT_GROUPER",
    "JobModel",
    "StreamPartitionCounts",
    "SystemStreamPartition",
    "mapping_from_groups",
    "pretty_json",
    "utc_now_iso",
]
