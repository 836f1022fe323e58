"""Stream partitions: the SSP, a stream's partition counts, and the JSON codec and field
checks the job model (`core.model`) is built from."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_samza_expand.core.errors import InvalidJobModelError

_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$")
_STREAM_FIELDS = frozenset({"system", "stream", "current", "initial"})


@dataclass(frozen=True, order=True, slots=True)
class SystemStreamPartition:
    """One partition of one stream of one system, e.g. ``[kafka, orders, 3]``."""

    system: str
    stream: str
    partition: int

    def __str__(self) -> str:
        return f"[{self.system}, {self.stream}, {self.partition}]"


@dataclass(frozen=True, order=True)
class StreamPartitionCounts:
    """A stream's partition count now (``current``) and when the job first ran (``initial``)."""

    system: str
    stream: str
    current: int
    initial: int


def bad_field(field_name: str, problem: str) -> InvalidJobModelError:
    return InvalidJobModelError(f"job model field '{field_name}' {problem}")


def require_str(value: Any, field_name: str) -> str:
    if not isinstance(value, str) or not value:
        raise bad_field(field_name, f"must be a non-empty string, got {value!r}")
    return value


def require_positive_int(value: Any, field_name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise bad_field(field_name, f"must be a positive integer, got {value!r}")
    return value


def require_timestamp(value: Any, field_name: str) -> str:
    if not isinstance(value, str) or not _TIMESTAMP.match(value):
        raise bad_field(
            field_name, f"must be an ISO-8601 UTC time like '2026-11-22T01:02:03Z', got {value!r}"
        )
    return value


_SSP_TRIPLE = re.compile(r'\[\s*("(?:[^"\\]|\\.)*"),\s*("(?:[^"\\]|\\.)*"),\s*(\d+)\s*\]')


def pretty_json(doc: Any) -> str:
    """Indented JSON with sorted keys and each ``[system, stream, partition]`` on one line."""
    text = json.dumps(doc, sort_keys=True, indent=2)
    return _SSP_TRIPLE.sub(r"[\1, \2, \3]", text)


def mapping_from_groups(
    groups: Mapping[str, Iterable[SystemStreamPartition]],
    broadcast: Iterable[SystemStreamPartition] = (),
) -> dict[SystemStreamPartition, str]:
    """Invert task -> SSPs into SSP -> task, leaving out broadcast SSPs (they are in every task)."""
    skip = frozenset(broadcast)
    mapping: dict[SystemStreamPartition, str] = {}
    for task, ssps in groups.items():
        for ssp in ssps:
            if ssp in skip:
                continue
            if ssp in mapping:
                raise InvalidJobModelError(
                    f"SSP {ssp} is in tasks '{mapping[ssp]}' and '{task}': "
                    "an SSP belongs to exactly one task (or is broadcast)"
                )
            mapping[ssp] = task
    return mapping


def no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise bad_field(key, "appears twice in one JSON object; keep one")
        result[key] = value
    return result


def decode_ssp(raw: Any, where: str) -> SystemStreamPartition:
    if not isinstance(raw, list) or len(raw) != 3:
        raise bad_field(where, f"must be [system, stream, partition], got {raw!r}")
    system, stream, partition = raw
    require_str(system, f"{where}[0]")
    require_str(stream, f"{where}[1]")
    if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
        raise bad_field(f"{where}[2]", f"must be a partition number >= 0, got {partition!r}")
    return SystemStreamPartition(system, stream, partition)


def decode_streams(raw: Any) -> tuple[StreamPartitionCounts, ...]:
    if not isinstance(raw, list) or not raw:
        raise bad_field("streams", f"must be a non-empty list of stream objects, got {raw!r}")
    streams = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise bad_field(f"streams[{i}]", f"must be an object, got {item!r}")
        missing = sorted(_STREAM_FIELDS - item.keys())
        if missing:
            raise bad_field(f"streams[{i}].{missing[0]}", "is missing")
        unknown = sorted(item.keys() - _STREAM_FIELDS)
        if unknown:
            raise bad_field(f"streams[{i}].{unknown[0]}", "is not a stream field (remove it)")
        streams.append(
            StreamPartitionCounts(
                system=require_str(item["system"], f"streams[{i}].system"),
                stream=require_str(item["stream"], f"streams[{i}].stream"),
                current=require_positive_int(item["current"], f"streams[{i}].current"),
                initial=require_positive_int(item["initial"], f"streams[{i}].initial"),
            )
        )
    return tuple(streams)


__all__ = [
    "StreamPartitionCounts",
    "SystemStreamPartition",
    "bad_field",
    "decode_ssp",
    "decode_streams",
    "mapping_from_groups",
    "no_duplicate_keys",
    "pretty_json",
    "require_positive_int",
    "require_str",
    "require_timestamp",
]
