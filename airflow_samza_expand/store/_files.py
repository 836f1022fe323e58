"""The file backend: a local directory or an fsspec URL, one folder per job.

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

from airflow_samza_expand.core._lease import Lease
from airflow_samza_expand.core.errors import ExpansionError
from airflow_samza_expand.store._backend import Claim, Stored
from airflow_samza_expand.store._coordinator_store import CoordinatorStore
from airflow_samza_expand.store._file_ops import (
    FsspecFiles,
    LocalFiles,
    file_name,
    identifier,
    open_files,
)
from airflow_samza_expand.store._kinds import (
    EXPANSION,
    JOB_MODEL,
    LEASE,
    LEGACY_EXPANSION,
    coordinator_topic,
)
from airflow_samza_expand.store._records import check_id

# folder of each record kind under <root>/<job>/ (module docstring)
FOLDERS = {EXPANSION: "expansions", LEASE: "leases", LEGACY_EXPANSION: "expansion"}


def _number(name: str) -> int | None:
    stem = name[: -len(".json")] if name.endswith(".json") else ""
    return int(stem) if stem.isdigit() else None


def _folder(kind: str) -> str:
    return FOLDERS.get(kind, kind)


def _stem(ident: str) -> str:
    """The folder name of a conditional record's revisions."""
    return file_name(ident)[: -len(".json")]


class FileTree:
    """Backend (store._backend) on files: exclusive create decides every race."""

    exact_fencing = False  # a write racing a takeover may land: the store re-checks the fence

    def __init__(self, url_or_path: str, job_name: str) -> None:
        self.files: LocalFiles | FsspecFiles = open_files(url_or_path, job_name)
        self.location = self.files.path()

    def __repr__(self) -> str:
        return f"FileTree({self.location!r})"

    def refresh(self) -> None:
        """Nothing cached: every read goes to the files."""

    def close(self) -> None:
        """Nothing to release."""

    def _stored(self, raw: bytes, key: str, *parts: str, revision: int = 0) -> Stored:
        return Stored(raw, f"file {self.files.path(*parts)!r}", key, revision)

    # -- job models -------------------------------------------------------------------------

    def job_model_versions(self) -> list[int]:
        return sorted(v for v in map(_number, self.files.list(JOB_MODEL)) if v is not None)

    def job_model(self, version: int) -> Stored | None:
        raw = self.files.read(JOB_MODEL, f"{version}.json")
        if raw is None:
            return None
        return self._stored(raw, f"{JOB_MODEL}:{version}", JOB_MODEL, f"{version}.json")

    def job_model_writer(self, version: int) -> str | None:
        return None  # a file does not name its writer

    def claim_job_model(self, version: int, value: bytes, writer: str) -> Claim:
        """Create `<N>.json` exclusively: the first file wins."""
        name = f"{version}.json"
        target = self.files.path(JOB_MODEL, name)
        if self.files.create_exclusive(value, JOB_MODEL, name):
            return Claim(True, self._stored(value, f"{JOB_MODEL}:{version}", JOB_MODEL, name),
                         writer, target)  # fmt: skip
        winner = self.job_model(version)
        if winner is None:  # pragma: no cover - the file existed a moment ago
            raise ExpansionError(f"job model v{version} vanished from {self.location!r}")
        return Claim(False, winner, "the first writer", repr(target))

    # -- conditional records ----------------------------------------------------------------

    def _revisions(self, folder: str, ident: str) -> list[int]:
        names = self.files.list(folder, _stem(ident))
        return sorted(r for r in map(_number, names) if r is not None)

    def current(self, kind: str, ident: str) -> Stored | None:
        """The highest revision file (a loser's withdrawn file, gone since listed, is skipped)."""
        folder = _folder(kind)
        if kind == EXPANSION:
            check_id("expansion_id", ident)
        for revision in reversed(self._revisions(folder, ident)):
            raw = self.files.read(folder, _stem(ident), f"{revision}.json")
            if raw is not None:
                parts = (folder, _stem(ident), f"{revision}.json")
                return self._stored(raw, f"{folder}:{ident}", *parts, revision=revision)
        return None

    def ids(self, kind: str) -> list[str]:
        return [identifier(n) for n in self.files.names(_folder(kind))]

    def write_revision(
        self, kind: str, ident: str, expected: int, value: bytes, fence: Lease | None
    ) -> bool:
        """Create revision `expected + 1` if `expected` is current; True if ours is current.
        (The fence is checked by the store, before and after.)"""
        folder, stem = _folder(kind), _stem(ident)
        found = self.current(kind, ident)
        if (found.revision if found else 0) != expected:
            return False
        name = f"{expected + 1}.json"
        if not self.files.create_exclusive(value, folder, stem, name):
            return False
        revisions = self._revisions(folder, ident)
        if revisions and revisions[-1] > expected + 1:  # ours re-created an old, tidied revision
            self.files.delete(folder, stem, name)
            return False
        for old in revisions:
            if old < expected:
                self.files.delete(folder, stem, f"{old}.json")
        return True

    # -- plain records ----------------------------------------------------------------------

    def read(self, kind: str, key: str) -> Stored | None:
        folder, name = _folder(kind), file_name(key)
        raw = self.files.read(folder, name)
        return None if raw is None else self._stored(raw, f"{folder}:{key}", folder, name)

    def keys(self, kind: str) -> list[str]:
        return [identifier(n) for n in sorted(self.files.list(_folder(kind)))]

    def put(self, kind: str, key: str, value: bytes) -> None:
        self.files.replace(value, _folder(kind), file_name(key))

    def delete(self, kind: str, key: str) -> None:
        self.files.delete(_folder(kind), file_name(key))


class FileCoordinatorStore(CoordinatorStore):
    """The coordinator store in files (module docstring)."""

    def __init__(self, url_or_path: str, job_name: str) -> None:
        coordinator_topic(job_name)  # validates the name (it becomes a directory)
        self.backend: FileTree = FileTree(url_or_path, job_name)
        self.location = self.backend.location
        super().__init__(self.backend, job_name)

    def __repr__(self) -> str:
        return f"FileCoordinatorStore({self.location!r}, job={self.job_name!r})"


__all__ = ["FileCoordinatorStore", "FileTree"]
