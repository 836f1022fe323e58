"""Coordinator store in files: a local directory or an fsspec URL, one folder per job.

Layout under `<root>/<job>/` (ids URL-quoted)::

    job-model/<N>.json                 job model vN (created exclusively: the first writer wins)
    expansions/<id>/<revision>.json    expansion record revisions (created exclusively)
    leases/<name>/<revision>.json      lease record revisions (created exclusively)
    control/stop.json                  the stop request (replaced atomically)
    processor/<id>.json                heartbeats (replaced atomically)
    expansion/<id>.json                legacy untyped expansion documents (the UI reads them)

A conditional update of revision r creates `<r+1>.json` exclusively (local: temp file +
`os.link`, atomic and failing if the file exists; fsspec: mode "xb" where the backend has it),
so of two writers exactly one creates it; the current revision is the highest file. A winner
deletes revisions older than its predecessor. Fencing by a lease is checked before and after
the write: a write that races a takeover may land, and is then what the new holder reads after
acquiring (nothing is lost), but the old holder gets `LeaseLostError`. (The Kafka store decides
the same race exactly, by log order.)
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_samza_expand.core.errors import ExpansionError
from airflow_samza_expand.core.lease import Lease, check_current
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.core.record import ExpansionRecord
from airflow_samza_expand.store import lease as leases
from airflow_samza_expand.store.file_ops import file_name, identifier, open_files
from airflow_samza_expand.store.protocol import (
    CONTROL,
    JOB_MODEL,
    PROCESSOR,
    STOP_KEY,
    coordinator_topic,
)
from airflow_samza_expand.store.records import (
    check_id,
    check_update,
    check_write,
    decode_expansion,
    decode_json,
    decode_lease,
    decode_model,
    default_writer_id,
    encode_expansion,
    encode_json,
    heartbeat_value,
    lost_race,
    stale_revision,
    stop_value,
)

log = logging.getLogger(__name__)

EXPANSIONS = "expansions"
LEASES = "leases"
LEGACY_EXPANSION = "expansion"


def _number(name: str) -> int | None:
    stem = name[: -len(".json")] if name.endswith(".json") else ""
    return int(stem) if stem.isdigit() else None


class FileCoordinatorStore:
    """Coordinator store in files (module docstring)."""

    def __init__(self, url_or_path: str, job_name: str) -> None:
        coordinator_topic(job_name)  # validates the name (it becomes a directory)
        self.job_name = job_name
        self.writer_id = default_writer_id()
        self._files = open_files(url_or_path, job_name)
        self.location = self._files.path()

    def __repr__(self) -> str:
        return f"FileCoordinatorStore({self.location!r}, job={self.job_name!r})"

    def close(self) -> None:
        """Nothing to release (present for interface parity)."""

    def __enter__(self) -> FileCoordinatorStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- job models -------------------------------------------------------------------------

    def _versions(self) -> list[int]:
        return sorted(v for v in map(_number, self._files.list(JOB_MODEL)) if v is not None)

    def job_model(self, version: int) -> JobModel | None:
        raw = self._files.read(JOB_MODEL, f"{version}.json")
        if raw is None:
            return None
        where = f"file {self._files.path(JOB_MODEL, f'{version}.json')!r}"
        return decode_model(raw, self.job_name, version, where, f"{JOB_MODEL}:{version}")

    def latest_job_model(self) -> JobModel | None:
        versions = self._versions()
        return self.job_model(versions[-1]) if versions else None

    def job_model_history(self) -> list[JobModel]:
        models = [self.job_model(v) for v in self._versions()]
        return [m for m in models if m is not None]

    def write_job_model(self, model: JobModel) -> JobModel:
        """Write vN+1 while vN is newest, by exclusive create; the first file wins."""
        latest = self.latest_job_model()
        same = self.job_model(model.version) if isinstance(model, JobModel) else None
        stored = check_write(self.job_name, model, latest, same, me=self.writer_id)
        if stored is not None:
            return stored
        name = f"{model.version}.json"
        target = self._files.path(JOB_MODEL, name)
        if self._files.create_exclusive(model.to_json().encode(), JOB_MODEL, name):
            log.info("wrote job model v%d of %s to %s", model.version, self.job_name, target)
            return model
        winner = self.job_model(model.version)
        if winner is None:  # pragma: no cover - the file existed a moment ago
            raise ExpansionError(f"job model v{model.version} vanished from {self.location!r}")
        if winner.content_equals(model):
            return winner
        raise lost_race(
            self.job_name, repr(target), winner, model, "the first writer", self.writer_id
        )

    # -- conditional records ----------------------------------------------------------------

    def _revisions(self, folder: str, ident: str) -> list[int]:
        names = self._files.list(folder, file_name(ident)[: -len(".json")])
        return sorted(r for r in map(_number, names) if r is not None)

    def _current(self, folder: str, ident: str) -> tuple[int, bytes, str] | None:
        """(revision, bytes, path) of the highest revision, or None."""
        folder_name = file_name(ident)[: -len(".json")]
        for revision in reversed(self._revisions(folder, ident)):
            raw = self._files.read(folder, folder_name, f"{revision}.json")
            if raw is not None:  # else deleted since listed (a loser's withdrawal): look lower
                return revision, raw, self._files.path(folder, folder_name, f"{revision}.json")
        return None

    def _conditional(self, folder: str, ident: str, expected: int, value: bytes) -> bool:
        """Create revision `expected + 1` if `expected` is current; True if ours is current."""
        found = self._current(folder, ident)
        if (found[0] if found else 0) != expected:
            return False
        folder_name = file_name(ident)[: -len(".json")]
        name = f"{expected + 1}.json"
        if not self._files.create_exclusive(value, folder, folder_name, name):
            return False
        revisions = self._revisions(folder, ident)
        if revisions and revisions[-1] > expected + 1:  # ours re-created an old, tidied revision
            self._files.delete(folder, folder_name, name)
            return False
        for old in revisions:
            if old < expected:
                self._files.delete(folder, folder_name, f"{old}.json")
        return True

    def get_expansion(self, expansion_id: str) -> ExpansionRecord | None:
        found = self._current(EXPANSIONS, check_id("expansion_id", expansion_id))
        if found is None:
            return None
        revision, raw, path = found
        return decode_expansion(raw, f"file {path!r}", f"{EXPANSIONS}:{expansion_id}", revision)

    def expansions(self) -> list[ExpansionRecord]:
        records = (self.get_expansion(identifier(n)) for n in self._files.names(EXPANSIONS))
        found = [r for r in records if r is not None]
        return sorted(found, key=lambda r: r.created_at, reverse=True)

    def put_expansion(
        self, record: ExpansionRecord, *, expected_revision: int, fence: Lease | None = None
    ) -> ExpansionRecord:
        """Conditional update (store.protocol.CoordinatorStore.put_expansion)."""
        value = encode_expansion(self.job_name, record, expected_revision)
        expansion_id = record.expansion_id
        lease = None if fence is None else self.get_lease(fence.name)
        check_update(record, expected_revision, self.get_expansion(expansion_id), fence, lease)
        if not self._conditional(EXPANSIONS, expansion_id, expected_revision, value):
            raise stale_revision(expansion_id, expected_revision, self.get_expansion(expansion_id))
        if fence is not None:
            check_current(self.get_lease(fence.name), fence)
        return dataclasses.replace(record, revision=expected_revision + 1)

    def get_lease(self, name: str) -> Lease | None:
        found = self._current(LEASES, name)
        if found is None:
            return None
        revision, raw, path = found
        return decode_lease(raw, f"file {path!r}", f"{LEASES}:{name}", revision)

    def write_lease(self, lease: Lease, expected_revision: int) -> Lease | None:
        """Low level (use acquire/renew/release): store `lease` as the revision after
        `expected_revision`; None when another writer got there first."""
        value = encode_json(f"lease {lease.name!r}", lease.to_dict())
        if self._conditional(LEASES, lease.name, expected_revision, value):
            return dataclasses.replace(lease, revision=expected_revision + 1)
        return None

    def acquire_lease(self, name: str, holder: str, ttl_s: float | None = None) -> Lease:
        return leases.acquire(self, name, holder, ttl_s)

    def renew_lease(self, lease: Lease) -> Lease:
        return leases.renew(self, lease)

    def release_lease(self, lease: Lease) -> None:
        leases.release(self, lease)

    # -- plain records ----------------------------------------------------------------------

    def _read_json(self, folder: str, ident: str) -> dict | None:
        name = file_name(ident)
        raw = self._files.read(folder, name)
        if raw is None:
            return None
        return decode_json(raw, f"file {self._files.path(folder, name)!r}", f"{folder}:{ident}")

    def request_stop(self, version: int, reason: str) -> None:
        self._files.replace(stop_value(version, reason), CONTROL, file_name(STOP_KEY))

    def stop_request(self) -> dict | None:
        return self._read_json(CONTROL, STOP_KEY)

    def clear_stop(self) -> None:
        self._files.delete(CONTROL, file_name(STOP_KEY))

    def heartbeat(
        self,
        processor_id: str,
        job_model_version: int,
        state: str,
        *,
        role: str | None = None,
        ttl_s: float | None = None,
        uncovered: Mapping[str, Sequence[int]] | None = None,
        stale_placements: Mapping[str, Any] | None = None,
        capabilities: Sequence[str] | None = None,
    ) -> None:
        value = heartbeat_value(
            job_model_version, state, role, ttl_s, uncovered, stale_placements, capabilities
        )
        self._files.replace(value, PROCESSOR, file_name(check_id("processor_id", processor_id)))

    def remove_processor(self, processor_id: str) -> None:
        self._files.delete(PROCESSOR, file_name(check_id("processor_id", processor_id)))

    def processors(self) -> dict[str, dict]:
        result = {}
        for name in sorted(self._files.list(PROCESSOR)):
            record = self._read_json(PROCESSOR, identifier(name))
            if record is not None:
                result[identifier(name)] = record
        return result

    # -- legacy untyped expansion documents (records older than typed ones; the UI reads them) -

    def put_expansion_doc(self, expansion_id: str, record: dict) -> None:
        value = encode_json("expansion record", record)
        ident = check_id("expansion_id", expansion_id)
        self._files.replace(value, LEGACY_EXPANSION, file_name(ident))

    def get_expansion_doc(self, expansion_id: str) -> dict | None:
        return self._read_json(LEGACY_EXPANSION, expansion_id)


__all__ = ["FileCoordinatorStore"]
