"""The one clock and timestamp format of the project.

Timestamps are ISO-8601 UTC strings with millisecond precision and a ``Z`` suffix,
``2026-11-23T12:00:00.123Z``. `parse_iso` also reads the older second-precision
(``...:00Z``) and microsecond (``...:00.123456Z``) forms and ``+00:00`` offsets, so records
written before this module existed still parse.

Leases and heartbeats compare a stored timestamp with `utc_now()` of the reading process;
callers tolerate small clock differences between hosts (see `CLOCK_SKEW_S`).
"""

from __future__ import annotations

from datetime import UTC, datetime

# How far apart two hosts' clocks may be before lease expiry decisions can go wrong; a lease
# counts as expired only `CLOCK_SKEW_S` after its nominal expiry (docs/operations.md).
CLOCK_SKEW_S = 2.0


def utc_now() -> datetime:
    """Now, timezone-aware UTC."""
    return datetime.now(UTC)


def to_iso(moment: datetime) -> str:
    """``2026-11-23T12:00:00.123Z``; a naive datetime is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def now_iso() -> str:
    """`to_iso(utc_now())`."""
    return to_iso(utc_now())


def parse_iso(text: str) -> datetime:
    """A timestamp of this module (or an older ISO-8601 UTC form) as an aware datetime.

    ValueError names the text and the expected form.
    """
    problem = f"expected an ISO-8601 UTC time like '2026-11-23T12:00:00.123Z', got {text!r}"
    if not isinstance(text, str) or not text:
        raise ValueError(problem)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(problem) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def age_s(iso: str, now: datetime | None = None) -> float:
    """Seconds since `iso` (negative if it lies in the future of `now`)."""
    return ((now or utc_now()) - parse_iso(iso)).total_seconds()


__all__ = ["CLOCK_SKEW_S", "age_s", "now_iso", "parse_iso", "to_iso", "utc_now"]
