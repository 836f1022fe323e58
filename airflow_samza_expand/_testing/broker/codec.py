"""Kafka wire framing and kio-based encoding for the development broker (test/dev tool only).

Requests are decoded with kio's generated schemas; handlers answer with plain dicts that
`build` turns into the kio response entity of the negotiated version, filling fields a
version lacks and dropping fields it does not have. This keeps each handler version-agnostic.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import io
import struct
from collections.abc import Mapping
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    is_optional,
)

_HEAD = struct.Struct(">hhi")


class FrameError(Exception):
    """A frame that cannot be decoded; the connection that sent it is closed."""


@dataclasses.dataclass(frozen=True)
class _FieldSpec:
    name: str
    kafka_type: str
    entity: type | None  # nested entity type, for entity and entity-array fields
    is_array: bool
    optional: bool
    has_default: bool


@functools.cache
def _specs(cls: type) -> tuple[_FieldSpec, ...]:
    specs = []
    for f in dataclasses.fields(cls):
        fc = classify_field(f)
        entity = fc.type_ if isinstance(fc, EntityField | EntityTupleField) else None
        specs.append(
            _FieldSpec(
                name=f.name,
                kafka_type=f.metadata.get("kafka_type", ""),
                entity=entity,
                is_array=fc.is_array,
                optional=is_optional(f),
                has_default=f.default is not dataclasses.MISSING
                or f.default_factory is not dataclasses.MISSING,
            )
        )
    return tuple(specs)


def _missing(spec: _FieldSpec) -> Any:
    if spec.is_array:
        return ()
    if spec.entity is not None:
        return None if spec.optional else build(spec.entity, {})
    kt = spec.kafka_type
    if kt == "error_code":
        return ErrorCode.none
    if kt in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(0)
    if spec.optional:
        return None
    if kt == "string":
        return ""
    if kt in ("bytes", "records"):
        return b""
    if kt == "bool":
        return False
    return 0


def _convert(spec: _FieldSpec, value: Any) -> Any:
    if value is None:  # null where a version has no nullable field: that field's default
        return None if spec.optional else _missing(spec)
    if spec.entity is not None:
        if spec.is_array:
            return tuple(build(spec.entity, v) if isinstance(v, Mapping) else v for v in value)
        return build(spec.entity, value) if isinstance(value, Mapping) else value
    kt = spec.kafka_type
    if kt == "error_code" and not isinstance(value, ErrorCode):
        return ErrorCode(int(value))
    if kt in ("timedelta_i32", "timedelta_i64") and isinstance(value, int | float):
        return datetime.timedelta(milliseconds=value)
    if spec.is_array and not isinstance(value, tuple):
        return tuple(value)
    return value


def build(cls: type, data: Mapping[str, Any]) -> Any:
    """Make a kio entity of `cls` from a dict; unknown keys are ignored, missing ones defaulted."""
    kwargs = {}
    for spec in _specs(cls):
        if spec.name in data:
            kwargs[spec.name] = _convert(spec, data[spec.name])
        elif not spec.has_default:
            kwargs[spec.name] = _missing(spec)
    return cls(**kwargs)


def has_field(cls: type, name: str) -> bool:
    return any(s.name == name for s in _specs(cls))


@dataclasses.dataclass(frozen=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request frame (without its size prefix)."""
    if len(frame) < _HEAD.size:
        raise FrameError(f"frame of {len(frame)} bytes is shorter than a request header")
    return _HEAD.unpack_from(frame)


def decode_request(frame: bytes) -> Request:
    api_key, api_version, correlation_id = peek_header(frame)
    req_cls = load_request_schema(api_key, api_version)
    try:
        header, used = entity_reader(req_cls.__header_schema__)(frame, 0)
        body, used2 = entity_reader(req_cls)(frame, used)
    except Exception as exc:  # kio raises several types for malformed input
        raise FrameError(f"cannot decode {req_cls.__name__} v{api_version}: {exc!r}") from exc
    # Like Kafka, ignore bytes after the last field (librdkafka sends a few for some versions).
    return Request(api_key, api_version, correlation_id, header.client_id, body)


def response_class(api_key: int, api_version: int) -> type:
    return load_response_schema(api_key, api_version)


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Any) -> bytes:
    """Size-prefixed response frame; `body` is a dict or an entity of the right version."""
    resp_cls = response_class(api_key, api_version)
    if isinstance(body, Mapping):
        body = build(resp_cls, body)
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    header_cls = resp_cls.__header_schema__
    entity_writer(header_cls)(buf, header_cls(correlation_id=correlation_id))
    entity_writer(resp_cls)(buf, body)
    out = buf.getbuffer()
    struct.pack_into(">i", out, 0, len(out) - 4)
    return bytes(out)
