"""Green means done: what the cluster must show before an expansion's run may end green, and
the repair of a record that an earlier version left behind its own outcome.

`missing` compares an expansion record with Kafka and the coordinator store (the rule itself,
pure, is `gaps`): every grown stream
at its target count (a stream that stays is not looked at), job model vN+1 the newest, no live
active processor on another version (and, when the DAG waited for an acknowledgement, one on
vN+1), the record ``completed``. The last step fails with the list when it is not empty."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._protocol import records
from airflow_samza_expand.core._lease import Lease
from airflow_samza_expand.core._liveness import acknowledging, statuses
from airflow_samza_expand.core._record import TRANSITIONS, ExpansionRecord, ExpansionStatus
from airflow_samza_expand.core.errors import ExpansionError
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store import CoordinatorStore

log = logging.getLogger(__name__)


class OutcomeMissingError(ExpansionError):
    """A run would end green while the cluster does not show its expansion's outcome."""


def missing(store: CoordinatorStore, admin: KafkaAdmin, record: ExpansionRecord) -> list[str]:
    """What the cluster does not (yet) show of `record`'s outcome; empty when all of it."""
    latest = store.latest_job_model()
    return gaps(
        record,
        _live_counts(admin, record),
        latest.version if latest is not None else None,
        store.processors(),
    )


def gaps(
    record: ExpansionRecord,
    live_counts: Mapping[str, int],
    newest: int | None,
    processors: Mapping[str, Mapping[str, Any]],
) -> list[str]:
    """The outcome's rule (pure): what of `record`'s outcome the cluster's `live_counts` of the
    grown streams, `newest` job model version and `processors` do not show."""
    found = _behind(record, live_counts)
    if newest != record.target_version:
        found.append(
            f"job model v{record.target_version} is not the newest (newest: "
            f"{'none' if newest is None else f'v{newest}'})"
        )
    stale = sorted(
        f"{pid} (v{s.job_model_version})"
        for pid, s in statuses(processors).items()
        if s.alive() and s.state == "running" and s.role in (None, "active")
        and s.job_model_version != record.target_version
    )  # fmt: skip
    if stale:
        found.append(f"live processors run another job model: {', '.join(stale)}")
    if "ack" in record.results and not _ran(processors, record.target_version):
        found.append(f"no processor has run job model v{record.target_version}")
    if record.status != ExpansionStatus.COMPLETED:
        found.append(f"the record is {record.status.value!r}, not 'completed'")
    return found


def require(store: CoordinatorStore, admin: KafkaAdmin, expansion_id: str) -> ExpansionRecord:
    """The record when its whole outcome is on the cluster, else OutcomeMissingError naming
    every part that is not."""
    record = records.require(store, expansion_id)
    found = missing(store, admin, record)
    if found:
        raise OutcomeMissingError(
            f"expansion {expansion_id} of job {record.job_name!r} is not done on the cluster: "
            + "; ".join(found)
            + " - see the run's earlier task logs, clear the failed step and rerun the DAG"
        )
    return record


def _live_counts(admin: KafkaAdmin, record: ExpansionRecord) -> dict[str, int]:
    """The live partition counts of the streams `record` grows (no request when none)."""
    grown = record.grown_counts()
    return admin.partition_counts(sorted(grown)) if grown else {}


def _behind(record: ExpansionRecord, live_counts: Mapping[str, int]) -> list[str]:
    """Each grown stream below its target."""
    return [
        f"topic {topic!r} has {live_counts[topic]} partitions, target {after}"
        for topic, (_, after) in record.grown_counts().items()
        if live_counts[topic] < after
    ]


def _ran(processors: Mapping[str, Mapping[str, Any]], version: int) -> bool:
    """A processor runs `version` now, or ran it and stopped cleanly (an available-now run)."""
    if acknowledging(processors, version):
        return True
    return any(
        s.job_model_version == version and s.state == "stopped"
        for s in statuses(processors).values()
    )


def finished_but_open(
    store: CoordinatorStore, admin: KafkaAdmin, record: ExpansionRecord, latest: JobModel
) -> bool:
    """`record` ran its report step, wrote the newest job model and grew every stream it plans,
    yet is not ``completed``: an earlier version dropped its status transitions (a stream that
    stays kept it at ``planned``). Its intent is done; it must not be resumed."""
    report = record.steps.get("report")
    return (
        record.status not in (ExpansionStatus.COMPLETED, ExpansionStatus.FAILED)
        and report is not None
        and report.ended_at is not None
        and record.target_version == latest.version
        and not _behind(record, _live_counts(admin, record))
    )


def close_finished(
    store: CoordinatorStore,
    admin: KafkaAdmin,
    latest: JobModel,
    fence: Lease | None,
    *,
    write: bool = True,
) -> set[str]:
    """Complete every record that `finished_but_open` finds (a repair, logged: the record is
    walked forward through the status machine, one allowed transition a write). Returns their
    ids; with ``write=False`` (a dry run) only finds them."""
    closed = set()
    for record in store.expansions():
        if not finished_but_open(store, admin, record, latest):
            continue
        closed.add(record.expansion_id)
        if not write:
            continue

        def repair(current: ExpansionRecord) -> ExpansionRecord | None:
            """One transition forward, the furthest the status machine allows."""
            if current.status in (ExpansionStatus.COMPLETED, ExpansionStatus.FAILED):
                return None
            allowed = TRANSITIONS[current.status]
            return current.advance(next(s for s in reversed(records.ORDER) if s in allowed))

        log.warning(
            "Expansion %s ran every step, wrote job model v%d and grew %s, but its record was "
            "left at %r by an earlier version: completing it (it is not resumed).",
            record.expansion_id,
            record.target_version,
            ", ".join(f"{t} {b}->{a}" for t, (b, a) in record.grown_counts().items()),
            record.status.value,
        )
        while records.update(store, record.expansion_id, repair, fence=fence).status not in (
            ExpansionStatus.COMPLETED,
            ExpansionStatus.FAILED,
        ):
            pass  # each write one allowed transition: the store's machine holds for a repair too
    return closed


__all__ = [
    "OutcomeMissingError",
    "close_finished",
    "finished_but_open",
    "gaps",
    "missing",
    "require",
]
