"""Leases: one holder at a time, an epoch that fences old holders.

docs/design.md 'Ownership, leases and fencing' and 'Processors and the active lease' say why.

A lease record ``{name, holder, epoch, acquired_at, renewed_at, ttl_s, released}`` lives in the
coordinator store under key type ``lease`` and key `name` (``expansion`` or ``active``). The
rules, shared by every store (the store only makes each change conditional on the revision it
read, so of two racing writers exactly one wins):

* **acquire** (holder H, ttl): free (never held, released) or expired -> H holds it with
  ``epoch + 1``; already held by H and not expired -> renewed, same epoch; held by another
  holder and not expired -> `LeaseHeldError` naming the holder. Without a ttl, H keeps the
  ttl of its own last hold (the plan chooses it, later steps renew it), and a new holder gets
  the lease's default (`DEFAULT_TTLS`).
* **renew**: only the current holder at the current epoch; else `LeaseLostError`. An expired
  lease that nobody took is still the holder's: renewing it keeps the epoch.
* **release**: the current holder marks it released (epoch kept, so the next holder gets
  ``epoch + 1``); releasing a lease one no longer holds is a no-op.
* **expiry**: a lease is expired `CLOCK_SKEW_S` after ``renewed_at + ttl_s`` by the reader's
  clock (core._clock), so a holder whose clock is a little behind is not robbed early. Holders
  renew every ``ttl_s / 3``.
* **fencing**: a write fenced by a lease (``put_expansion(..., fence=lease)``) is accepted only
  while that holder and epoch are current; afterwards it raises `LeaseLostError`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from airflow_samza_expand.core._clock import CLOCK_SKEW_S, parse_iso, to_iso, utc_now
from airflow_samza_expand.core.errors import LeaseHeldError, LeaseLostError

EXPANSION_LEASE = "expansion"
ACTIVE_LEASE = "active"
LEASE_NAMES = frozenset({EXPANSION_LEASE, ACTIVE_LEASE})
DEFAULT_TTL_S = 60.0
# a new hold taken without a ttl: an expansion spans minutes of waits between its steps
DEFAULT_TTLS = {EXPANSION_LEASE: 600.0, ACTIVE_LEASE: DEFAULT_TTL_S}


@dataclass(frozen=True)
class Lease:
    """One lease as stored; `revision` is the store's revision of the lease record."""

    name: str
    holder: str
    epoch: int
    acquired_at: str
    renewed_at: str
    ttl_s: float
    released: bool = False
    revision: int = 0

    def __post_init__(self) -> None:
        check_lease_args(self.name, self.holder, self.ttl_s)
        if isinstance(self.epoch, bool) or not isinstance(self.epoch, int) or self.epoch < 1:
            raise ValueError(f"lease epoch must be an integer >= 1, got {self.epoch!r}")
        parse_iso(self.acquired_at)
        parse_iso(self.renewed_at)

    def expires_at(self) -> datetime:
        """``renewed_at + ttl_s`` (nominal; see `expired` for the skew margin)."""
        return parse_iso(self.renewed_at) + timedelta(seconds=self.ttl_s)

    def expired(self, now: datetime | None = None, *, skew_s: float = CLOCK_SKEW_S) -> bool:
        """Released, or `skew_s` past `expires_at` by `now` (default: this host's clock)."""
        if self.released:
            return True
        return (now or utc_now()) > self.expires_at() + timedelta(seconds=skew_s)

    def held_by(self, holder: str) -> bool:
        return not self.released and self.holder == holder

    def to_dict(self) -> dict[str, Any]:
        doc = dataclasses.asdict(self)
        doc.pop("revision")
        return doc

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], revision: int = 0) -> Lease:
        """ValueError naming the field when `doc` is not a lease record."""
        try:
            return cls(
                name=doc["name"],
                holder=doc["holder"],
                epoch=doc["epoch"],
                acquired_at=doc["acquired_at"],
                renewed_at=doc["renewed_at"],
                ttl_s=float(doc["ttl_s"]),
                released=bool(doc.get("released", False)),
                revision=revision,
            )
        except KeyError as exc:
            raise ValueError(f"lease record misses field {exc.args[0]!r}") from None
        except TypeError as exc:
            raise ValueError(f"lease record has a field of the wrong type: {exc}") from None

    def describe(self) -> str:
        state = "released" if self.released else f"renewed {self.renewed_at}, ttl {self.ttl_s:g} s"
        return f"lease {self.name!r} of {self.holder!r} (epoch {self.epoch}, {state})"


def check_lease_args(name: str, holder: str, ttl_s: float) -> None:
    """ValueError naming the problem and the fix."""
    if name not in LEASE_NAMES:
        raise ValueError(f"lease name {name!r} is not one of {sorted(LEASE_NAMES)} - use one")
    if not isinstance(holder, str) or not holder:
        raise ValueError(
            f"lease holder must be a non-empty string like 'airflow:<dag_id>/<run_id>', "
            f"got {holder!r}"
        )
    if isinstance(ttl_s, bool) or not isinstance(ttl_s, int | float) or not ttl_s > 0:
        raise ValueError(f"lease ttl_s must be a positive number of seconds, got {ttl_s!r}")


def hold_ttl(current: Lease | None, name: str, holder: str, ttl_s: float | None) -> float:
    """`ttl_s`, else the ttl of `holder`'s own last hold of `name`, else the lease's default."""
    if ttl_s is not None:
        return ttl_s
    if current is not None and current.holder == holder:
        return current.ttl_s
    return DEFAULT_TTLS.get(name, DEFAULT_TTL_S)


def decide_acquire(
    current: Lease | None,
    name: str,
    holder: str,
    ttl_s: float | None,
    now: datetime | None = None,
) -> Lease:
    """The lease record to write for `holder` acquiring `name`, or LeaseHeldError."""
    ttl_s = hold_ttl(current, name, holder, ttl_s)
    check_lease_args(name, holder, ttl_s)
    moment = now or utc_now()
    stamp = to_iso(moment)
    if current is not None and current.held_by(holder) and not current.expired(moment):
        return dataclasses.replace(current, renewed_at=stamp, ttl_s=float(ttl_s))
    if current is not None and not current.expired(moment):
        raise LeaseHeldError(
            f"{current.describe()} is held until {to_iso(current.expires_at())}; {holder!r} "
            "cannot take it - wait for the holder to finish (or for the lease to expire)",
            current,
        )
    epoch = 1 if current is None else current.epoch + 1
    revision = 0 if current is None else current.revision
    return Lease(name, holder, epoch, stamp, stamp, float(ttl_s), False, revision)


def check_current(current: Lease | None, lease: Lease) -> Lease:
    """`current` if `lease`'s holder and epoch are still current, else LeaseLostError."""
    if (
        current is None
        or current.released
        or (current.holder, current.epoch)
        != (
            lease.holder,
            lease.epoch,
        )
    ):
        now_held = (
            "nobody holds it"
            if current is None or current.released
            else (f"now {current.describe()}")
        )
        raise LeaseLostError(
            f"{lease.holder!r} lost lease {lease.name!r} (epoch {lease.epoch}): {now_held} - "
            "stop writing; re-read the expansion and acquire the lease again",
            current,
        )
    return current


def decide_renew(current: Lease | None, lease: Lease, now: datetime | None = None) -> Lease:
    """The renewed lease record, or LeaseLostError."""
    held = check_current(current, lease)
    return dataclasses.replace(held, renewed_at=to_iso(now or utc_now()))


def decide_release(
    current: Lease | None, lease: Lease, now: datetime | None = None
) -> Lease | None:
    """The released lease record, or None when `lease` is no longer current (no-op)."""
    try:
        held = check_current(current, lease)
    except LeaseLostError:
        return None
    return dataclasses.replace(held, released=True, renewed_at=to_iso(now or utc_now()))


__all__ = [
    "ACTIVE_LEASE",
    "DEFAULT_TTLS",
    "DEFAULT_TTL_S",
    "EXPANSION_LEASE",
    "LEASE_NAMES",
    "Lease",
    "check_current",
    "check_lease_args",
    "decide_acquire",
    "decide_release",
    "decide_renew",
]
