"""Which partitions of a newer job model a running job may read now, when it switches in place
(docs/design.md 'The switch in place').

An expansion's barrier snapshot ``H`` maps each grown stream to its *old* partitions' high
watermarks (``{stream: {p: H[p]}}`` for ``p < N_old``). With the snapshots of the expansions up
to job model vN+1 (oldest first), a partition ``c`` of vN+1 is readable when

* it is no child: its stream was not grown by any of them, or ``c`` is below the smallest
  old count (a partition the job read before any expansion); or
* it is a child of the newest snapshot whose old count is ``<= c`` - parent
  ``p = c % N_old`` - the parent is readable and the job's own committed position on ``p``
  (the next offset to read) has reached ``H[p]`` (parent before child, per parent: a moved key
  waits only for its own old partition).

Pure functions; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from airflow_samza_expand.core.errors import ExpansionError

Snapshot = Mapping[str, Mapping[int, int]]  # stream -> old partition -> H[p]
Ssp = tuple[str, int]


def check_snapshot(snapshot: Snapshot, what: str = "barrier snapshot") -> dict[str, dict[int, int]]:
    """The snapshot with int keys; ExpansionError unless each stream's old partitions are
    ``0..N_old-1`` with offsets >= 0."""
    out: dict[str, dict[int, int]] = {}
    for stream, marks in snapshot.items():
        parts = {int(p): int(h) for p, h in marks.items()}
        if sorted(parts) != list(range(len(parts))) or not parts:
            raise ExpansionError(
                f"{what} of stream {stream!r} names partitions {sorted(parts)}, not 0..N-1 of "
                "the old partition count - the expansion record is corrupt: rerun its barrier"
            )
        if any(h < 0 for h in parts.values()):
            raise ExpansionError(f"{what} of stream {stream!r} has a negative offset: {parts}")
        out[str(stream)] = parts
    return out


def parent(stream: str, partition: int, snapshots: Sequence[Snapshot]) -> tuple[int, int] | None:
    """``(p, H[p])`` of the expansion that added ``stream``'s ``partition``; None when no
    expansion among ``snapshots`` (oldest first) added it."""
    found: tuple[int, int] | None = None
    best = -1
    for snapshot in snapshots:
        marks = snapshot.get(stream)
        if not marks:
            continue
        old = len(marks)
        if old <= partition and old > best:
            best = old
            p = partition % old
            found = (p, int(marks[p]))
    return found


def readable(
    counts: Mapping[str, int],
    snapshots: Sequence[Snapshot],
    positions: Mapping[Ssp, int],
) -> frozenset[Ssp]:
    """The SSPs of a job model with partition ``counts`` that the job may read now, given the
    job's committed ``positions`` (next offset to read; a missing one is 0)."""
    checked = [check_snapshot(s) for s in snapshots]
    memo: dict[Ssp, bool] = {}

    def ok(stream: str, partition: int) -> bool:
        key = (stream, partition)
        if key not in memo:
            up = parent(stream, partition, checked)
            memo[key] = up is None or (
                ok(stream, up[0]) and positions.get((stream, up[0]), 0) >= up[1]
            )
        return memo[key]

    return frozenset(
        (stream, p) for stream, n in sorted(counts.items()) for p in range(n) if ok(stream, p)
    )


def gated(
    counts: Mapping[str, int], snapshots: Sequence[Snapshot], positions: Mapping[Ssp, int]
) -> dict[Ssp, tuple[int, int]]:
    """The SSPs not readable yet -> ``(their parent, H[parent])`` (for logs)."""
    now = readable(counts, snapshots, positions)
    checked = [check_snapshot(s) for s in snapshots]
    out: dict[Ssp, tuple[int, int]] = {}
    for stream, n in sorted(counts.items()):
        for p in range(n):
            if (stream, p) not in now:
                up = parent(stream, p, checked)
                assert up is not None
                out[(stream, p)] = up
    return out


__all__ = ["Snapshot", "check_snapshot", "gated", "parent", "readable"]
