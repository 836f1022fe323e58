"""What an expansion under way records for the people watching it (the UI reads it from the
record): the producer refresh grace's length and end, and a bounded history of the barrier lag
per old partition. Written by the barrier step (`_protocol.barrier.step`); nothing decides on it."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from airflow_samza_expand._protocol import records
from airflow_samza_expand.core._clock import now_iso, parse_iso, to_iso
from airflow_samza_expand.core._lease import Lease
from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus
from airflow_samza_expand.store import CoordinatorStore

LAG_SAMPLES = 60  # the newest barrier lag samples an expansion record keeps
# partitions a lag sample names: a sample of a wider barrier keeps its most lagging ones (and
# counts the lagging ones), so the record - rewritten whole at every poll - does not grow with
# the partitions times the samples
LAG_PARTITIONS = 16
GRACE = "grace"
BARRIER_LAG = "barrier_lag"


def begin_barrier(
    store: CoordinatorStore,
    expansion_id: str,
    grace_ends: float,
    *,
    fence: Lease | None = None,
    record: ExpansionRecord | None = None,
) -> ExpansionRecord:
    """`records.begin` of the ``barrier_snapshot`` step that also stores, once, the grace it
    waits out: ``results["grace"]`` gets ``grace_s`` (from the grace start to `grace_ends`,
    epoch s) and ``ends_at``. Returns the record as stored."""
    if record is not None and "barrier_snapshot" in record.steps:
        return record

    def start(current: ExpansionRecord) -> ExpansionRecord | None:
        if "barrier_snapshot" in current.steps:
            return None
        out = current.with_step("barrier_snapshot", started_at=now_iso())
        grace = dict(current.results.get(GRACE) or {})
        expand = current.steps.get("expand")
        began = expand.ended_at if expand is not None and expand.ended_at else None
        began = began or grace.get("started_at")
        if began and grace_ends > 0:
            ends = datetime.fromtimestamp(grace_ends, UTC)
            length = max(grace_ends - parse_iso(began).timestamp(), 0.0)
            grace.update(started_at=began, grace_s=round(length, 3), ends_at=to_iso(ends))
            out = out.with_result(GRACE, grace)
        return out

    return records.update(store, expansion_id, start, fence=fence)


def note_lag(
    store: CoordinatorStore,
    expansion_id: str,
    lag: Mapping[str, Mapping[int, int]],
    *,
    fence: Lease | None = None,
) -> None:
    """Append one barrier lag sample ``{at, total, partitions: {"topic[p]": lag}}`` to
    ``results["barrier_lag"]``, keeping the newest `LAG_SAMPLES`; only while the record waits at
    its barrier (``barrier-snapshot``), so a rerun of a passed barrier writes nothing. A barrier
    of more than `LAG_PARTITIONS` partitions: the sample names its most lagging ones (ties by
    topic and partition) and ``lagging``, how many lag at all."""
    parts = {f"{t}[{p}]": int(n) for t, ps in sorted(lag.items()) for p, n in sorted(ps.items())}
    sample = {"at": now_iso(), "total": sum(parts.values()), "partitions": parts}
    if len(parts) > LAG_PARTITIONS:
        behind = [(name, n) for name, n in parts.items() if n > 0]
        most = sorted(behind, key=lambda item: -item[1])[:LAG_PARTITIONS]  # stable: by name
        sample.update(partitions=dict(most), lagging=len(behind))

    def add(current: ExpansionRecord) -> ExpansionRecord | None:
        if current.status != ExpansionStatus.BARRIER_SNAPSHOT:
            return None  # a rerun after the barrier passed (or failed) writes nothing
        earlier = list(current.results.get(BARRIER_LAG) or ())
        return current.with_result(BARRIER_LAG, [*earlier, sample][-LAG_SAMPLES:])

    records.update(store, expansion_id, add, fence=fence)


__all__ = ["BARRIER_LAG", "GRACE", "LAG_PARTITIONS", "LAG_SAMPLES", "begin_barrier", "note_lag"]
