"""Lease operations over any store's conditional lease write (rules: core._lease).

A store offers `LeaseIO`: read the lease record, and write one conditionally on the revision
read (None when another writer got that revision first). These functions re-read and decide
again after a lost race, so of N contenders exactly one holds the lease.
"""

from __future__ import annotations

import logging
from typing import Protocol

from airflow_samza_expand.core._lease import Lease, decide_acquire, decide_release, decide_renew
from airflow_samza_expand.core.errors import LeaseHeldError

log = logging.getLogger(__name__)

# A lost race means someone else wrote the lease first; after that re-read the decision is
# final (held by another -> LeaseHeldError), so a few attempts are plenty.
ATTEMPTS = 8


class LeaseIO(Protocol):
    def get_lease(self, name: str) -> Lease | None: ...

    def write_lease(self, lease: Lease, expected_revision: int) -> Lease | None: ...


def _revision(lease: Lease | None) -> int:
    return 0 if lease is None else lease.revision


def acquire(io: LeaseIO, name: str, holder: str, ttl_s: float | None) -> Lease:
    """Hold `name` for `holder` (renews when it already does); LeaseHeldError otherwise.
    `ttl_s` None: the holder's own last ttl (core._lease.hold_ttl)."""
    current = None
    for _ in range(ATTEMPTS):
        current = io.get_lease(name)
        wanted = decide_acquire(current, name, holder, ttl_s)
        stored = io.write_lease(wanted, _revision(current))
        if stored is not None:
            if current is None or stored.epoch != current.epoch:
                log.info("%s acquired lease %r (epoch %d)", holder, name, stored.epoch)
            return stored
        log.info("%s lost a race for lease %r; re-reading it", holder, name)
    current = io.get_lease(name)
    if current is not None and not current.expired() and not current.held_by(holder):
        raise LeaseHeldError(f"{current.describe()} is held; {holder!r} cannot take it", current)
    raise LeaseHeldError(  # pragma: no cover - needs ATTEMPTS lost races in a row
        f"lease {name!r} changed {ATTEMPTS} times while {holder!r} tried to take it - retry",
        current or wanted,
    )


def renew(io: LeaseIO, lease: Lease) -> Lease:
    """The renewed lease (same epoch); LeaseLostError when `lease` is no longer current."""
    for _ in range(ATTEMPTS):
        current = io.get_lease(lease.name)
        stored = io.write_lease(decide_renew(current, lease), _revision(current))
        if stored is not None:
            return stored
    return decide_renew(io.get_lease(lease.name), lease)  # pragma: no cover


def release(io: LeaseIO, lease: Lease) -> None:
    """Mark `lease` released if it is still current; otherwise do nothing."""
    for _ in range(ATTEMPTS):
        current = io.get_lease(lease.name)
        wanted = decide_release(current, lease)
        if wanted is None or io.write_lease(wanted, _revision(current)) is not None:
            if wanted is not None:
                log.info("%s released lease %r (epoch %d)", lease.holder, lease.name, lease.epoch)
            return


__all__ = ["ATTEMPTS", "LeaseIO", "acquire", "release", "renew"]
