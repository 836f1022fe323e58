"""What a coordinator store needs from where it keeps its bytes: the `Backend` contract.

`store._coordinator_store.CoordinatorStore` holds the record semantics (validation, revisions,
leases, fencing, decoding); a backend only stores bytes under three kinds of key:

* job models: version N, created once - the first candidate wins (`claim_job_model`);
* conditional records (kinds.EXPANSION, kinds.LEASE): revision r+1 of an id is accepted only
  while r is current (`write_revision`);
* plain records (kinds.CONTROL, kinds.PROCESSOR, kinds.LEGACY_EXPANSION): last write wins.

Two backends: `store._kafka.KafkaLog` (a compacted single-partition topic, the log order
decides) and `store._files.FileTree` (a directory or fsspec URL, exclusive create decides).
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from airflow_samza_expand.core._lease import Lease


class Stored(NamedTuple):
    """One stored value and how to name it in an error message."""

    value: bytes
    where: str  # "topic 't' at offset 5" / "file '/x/1.json'"
    key: str  # the record's key as text
    revision: int = 0  # conditional records: the accepted revision
    token: int | None = None  # same token -> same bytes (a decode cache key); None: no cache


class Claim(NamedTuple):
    """The outcome of writing job model vN: who won and where."""

    won: bool
    winner: Stored  # the stored vN (ours when `won`)
    winner_writer: str  # the winner's writer id, in words
    where: str  # where the race was decided, in words


class Backend(Protocol):
    """Bytes under job-model, conditional and plain keys (module docstring)."""

    # True when the backend decides a fenced write itself (Kafka: log order); False when the
    # store checks the fence again after a write (files)
    exact_fencing: bool

    def refresh(self) -> None:
        """Bring the backend's view up to date (before each store operation)."""

    def close(self) -> None:
        """Release clients (the backend can be used again afterwards)."""

    def job_model_versions(self) -> list[int]:
        """Stored job model versions, ascending."""
        ...

    def job_model(self, version: int) -> Stored | None:
        """The winning job model vN, or None."""
        ...

    def job_model_writer(self, version: int) -> str | None:
        """The writer id of stored vN, where the backend knows it."""
        ...

    def claim_job_model(self, version: int, value: bytes, writer: str) -> Claim:
        """Write `value` as a candidate for vN; the first wins (a loser's is withdrawn)."""
        ...

    def current(self, kind: str, ident: str) -> Stored | None:
        """The accepted revision of conditional record (kind, ident), or None."""
        ...

    def ids(self, kind: str) -> list[str]:
        """Ids of the conditional records of `kind`."""
        ...

    def write_revision(
        self, kind: str, ident: str, expected: int, value: bytes, fence: Lease | None
    ) -> bool:
        """Store `value` as revision `expected + 1` of (kind, ident); True if it is accepted."""
        ...

    def read(self, kind: str, key: str) -> Stored | None:
        """The plain record (kind, key), or None."""
        ...

    def keys(self, kind: str) -> list[str]:
        """Keys of the plain records of `kind`, sorted."""
        ...

    def put(self, kind: str, key: str, value: bytes) -> None:
        """Store plain record (kind, key) (last write wins)."""

    def delete(self, kind: str, key: str) -> None:
        """Delete plain record (kind, key) (idempotent)."""


__all__ = ["Backend", "Claim", "Stored"]
