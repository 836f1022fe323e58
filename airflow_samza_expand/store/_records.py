"""Encoding, decoding and checks shared by the coordinator stores (no I/O here)."""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_samza_expand.core._clock import now_iso
from airflow_samza_expand.core._lease import Lease, check_current
from airflow_samza_expand.core._liveness import CAPABILITIES
from airflow_samza_expand.core._record import ExpansionRecord
from airflow_samza_expand.core._secrets import refuse_secrets
from airflow_samza_expand.core._validate import check_fixed_tasks, check_next_version
from airflow_samza_expand.core.errors import (
    ConcurrentExpansionError,
    CorruptCoordinatorRecordError,
    InvalidJobModelError,
    StaleRevisionError,
)
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._kinds import PROCESSOR_ROLES, PROCESSOR_STATES


def default_writer_id() -> str:
    """A writer id unique to this process and store instance: `<host>:<pid>:<random>`."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def check_write(
    store_job: str,
    model: JobModel,
    latest: JobModel | None,
    same_version: JobModel | None,
    *,
    me: str,
    same_writer: str | None = None,
) -> JobModel | None:
    """Validate writing `model`; return the stored model when the write is a no-op.

    Refuses another job's model, a rule-1.3 break (core._validate) and a skipped version.
    `me` names this writer and `same_writer` the writer of `same_version` (for messages).
    """
    if not isinstance(model, JobModel):
        raise InvalidJobModelError(f"write_job_model needs a JobModel, got {type(model).__name__}")
    if model.job_name != store_job:
        raise InvalidJobModelError(
            f"job model of job {model.job_name!r} cannot be written to the store of job "
            f"{store_job!r} - open the store of job {model.job_name!r}"
        )
    check_fixed_tasks(model)
    if same_version is not None:
        if same_version.content_equals(model):
            return same_version
        newest = max(same_version.version, latest.version if latest else 0)
        author = f"writer {same_writer!r} " if same_writer else ""
        raise ConcurrentExpansionError(
            f"job model v{model.version} of job {store_job!r} already exists with other content, "
            f"written by {author}({same_version.created_by!r}, {same_version.created_at}); this "
            f"writer {me!r} ({model.created_by!r}) wrote nothing. v{newest} is newest and stays "
            "in force - plan the expansion again from it"
        )
    check_next_version(store_job, latest, model)
    return None


def lost_race(
    store_job: str, where: str, winner: JobModel, loser: JobModel, winner_writer: str, me: str
) -> ConcurrentExpansionError:
    return ConcurrentExpansionError(
        f"two writers raced for job model v{loser.version} of job {store_job!r} in {where}: "
        f"writer {winner_writer!r} ({winner.created_by!r}, {winner.created_at}) won and its model "
        f"stays in force; this writer {me!r} ({loser.created_by!r}, {loser.created_at}) lost "
        "and wrote nothing that counts - plan the expansion again from the newest model"
    )


def encode_json(what: str, record: Mapping[str, Any]) -> bytes:
    """Canonical JSON bytes; refuses secrets (SecretValueError) and non-JSON values."""
    refuse_secrets(record, what)
    try:
        return json.dumps(dict(record), sort_keys=True, separators=(",", ":")).encode()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be JSON-serialisable: {exc} - pass plain dicts") from None


def check_id(what: str, value: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string, got {value!r}")
    return value


def stop_value(version: int, reason: str) -> bytes:
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"stop request needs a job model version >= 1, got {version!r}")
    doc = {"version": version, "requested_at": now_iso(), "reason": str(reason)}
    return encode_json("stop request", doc)


def heartbeat_value(
    job_model_version: int,
    state: str,
    role: str | None = None,
    ttl_s: float | None = None,
    uncovered: Mapping[str, Sequence[int]] | None = None,
    stale_placements: Mapping[str, Any] | None = None,
    capabilities: Sequence[str] | None = None,
    consumer_group: str | None = None,
) -> bytes:
    """The processor record; ``role`` and ``ttl`` (seconds), ``uncovered``
    ({topic: [partition]}, spark._coverage), ``stale_placements`` (the order check's
    counts, core._stale.StaleSummary.counts) and ``consumer_group`` (the group it
    commits its processed offsets to) only when given."""
    if state not in PROCESSOR_STATES:
        raise ValueError(
            f"processor state {state!r} is not one of {sorted(PROCESSOR_STATES)} - use one of them"
        )
    if isinstance(job_model_version, bool) or not isinstance(job_model_version, int):
        raise ValueError(f"job_model_version must be an int, got {job_model_version!r}")
    doc: dict[str, Any] = {
        "job_model_version": job_model_version,
        "state": state,
        "heartbeat_at": now_iso(),
    }
    if role is not None:
        if role not in PROCESSOR_ROLES:
            raise ValueError(f"processor role {role!r} is not one of {sorted(PROCESSOR_ROLES)}")
        doc["role"] = role
    if ttl_s is not None:
        if isinstance(ttl_s, bool) or not isinstance(ttl_s, (int, float)) or ttl_s <= 0:
            raise ValueError(f"processor ttl_s must be a number > 0, got {ttl_s!r}")
        doc["ttl"] = float(ttl_s)
    if uncovered:
        doc["uncovered"] = {str(t): sorted(int(p) for p in ps) for t, ps in uncovered.items()}
    if stale_placements:
        doc["stale_placements"] = dict(stale_placements)
    if capabilities is not None:
        unknown = sorted(set(capabilities) - CAPABILITIES)
        if unknown:
            raise ValueError(
                f"processor capabilities {unknown} are not known - use {sorted(CAPABILITIES)}"
            )
        doc["capabilities"] = sorted(set(capabilities))
    if consumer_group is not None:
        if not isinstance(consumer_group, str) or not consumer_group:
            raise ValueError(f"processor consumer_group must be a non-empty string, got "
                             f"{consumer_group!r}")  # fmt: skip
        doc["consumer_group"] = consumer_group
    return encode_json("heartbeat", doc)


def _corrupt(kind: str, where: str, key: str, problem: object) -> CorruptCoordinatorRecordError:
    return CorruptCoordinatorRecordError(
        f"corrupt {kind} record in {where} (key {key}): {problem} - fix or delete the record "
        "(write a tombstone for the key / delete the file)"
    )


def decode_model(raw: bytes, job_name: str, version: int, where: str, key: str) -> JobModel:
    """The stored job model; CorruptCoordinatorRecordError if it does not decode, names another
    job or version, or breaks fixed tasks (then the message names the SSPs and the fix)."""
    try:
        model = JobModel.from_json(raw)
        check_fixed_tasks(model, need_algorithm=False)
    except InvalidJobModelError as exc:
        raise _corrupt("job model", where, key, f"{exc}; restore the model from a backup") from None
    if model.version != version or model.job_name != job_name:
        raise _corrupt(
            "job model",
            where,
            key,
            f"it holds job {model.job_name!r} v{model.version}, expected job {job_name!r} "
            f"v{version}",
        )
    return model


def decode_json(raw: bytes, where: str, key: str) -> dict:
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _corrupt("coordinator", where, key, f"not JSON ({exc})") from None
    if not isinstance(doc, dict):
        problem = f"expected a JSON object, got {type(doc).__name__}"
        raise _corrupt("coordinator", where, key, problem)
    return doc


def decode_expansion(raw: bytes, where: str, key: str, revision: int) -> ExpansionRecord:
    """The record with the store's `revision` (the stored value's own field is informative)."""
    doc = decode_json(raw, where, key)
    doc["revision"] = revision
    try:
        return ExpansionRecord.from_dict(doc)
    except CorruptCoordinatorRecordError as exc:
        raise _corrupt("expansion", where, key, exc) from None


def decode_lease(raw: bytes, where: str, key: str, revision: int) -> Lease:
    doc = decode_json(raw, where, key)
    try:
        return Lease.from_dict(doc, revision)
    except ValueError as exc:
        raise _corrupt("lease", where, key, exc) from None


def encode_expansion(store_job: str, record: ExpansionRecord, expected_revision: int) -> bytes:
    """The record's bytes as the revision after `expected_revision`; refuses another job's
    record and an `expected_revision` that is no integer >= 0."""
    if isinstance(expected_revision, bool) or not isinstance(expected_revision, int):
        raise TypeError(f"expected_revision must be an int >= 0, got {expected_revision!r}")
    if expected_revision < 0:
        raise ValueError(f"expected_revision must be >= 0 (0: create), got {expected_revision}")
    revision = expected_revision + 1
    if not isinstance(record, ExpansionRecord):
        raise TypeError(f"put_expansion needs an ExpansionRecord, got {type(record).__name__}")
    if record.job_name != store_job:
        raise ValueError(
            f"expansion {record.expansion_id!r} of job {record.job_name!r} cannot be stored for "
            f"job {store_job!r} - open the store of job {record.job_name!r}"
        )
    doc = record.to_dict()
    doc["revision"] = revision
    return encode_json(f"expansion record {record.expansion_id!r}", doc)


def check_update(
    record: ExpansionRecord,
    expected_revision: int,
    current: ExpansionRecord | None,
    fence: Lease | None,
    lease: Lease | None,
) -> None:
    """Before a conditional write: `current` is at `expected_revision` (StaleRevisionError),
    its status may become `record`'s (InvalidTransitionError) and `fence` is the `lease` in
    force (LeaseLostError)."""
    if (current.revision if current else 0) != expected_revision:
        raise stale_revision(record.expansion_id, expected_revision, current)
    if current is not None:
        current.check_successor(record.status)
    if fence is not None:
        check_current(lease, fence)


def stale_revision(
    expansion_id: str, expected: int, current: ExpansionRecord | None
) -> StaleRevisionError:
    found = (
        "none is stored"
        if current is None
        else (
            f"revision {current.revision} ({current.status.value}, by {current.owner!r}) is current"
        )
    )
    return StaleRevisionError(
        f"expansion {expansion_id!r} changed since it was read: expected revision {expected}, "
        f"but {found} - re-read the record and apply the change again",
        current,
    )


__all__ = [
    "check_id",
    "check_update",
    "check_write",
    "decode_expansion",
    "decode_json",
    "decode_lease",
    "decode_model",
    "default_writer_id",
    "encode_expansion",
    "encode_json",
    "heartbeat_value",
    "lost_race",
    "stale_revision",
    "stop_value",
]
