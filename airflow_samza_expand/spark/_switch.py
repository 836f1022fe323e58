"""The switch in place (docs/design.md 'The switch in place'), driver side: publish a newer job
model to the running provider reader (`spark._source`) and learn when it reads it; and when a query
on Spark's own Kafka source may be restarted on a newer job model (in-app: `barrier_passed`).

* `snapshots_up_to` - the barrier snapshots ``H`` of the expansions up to a job model, oldest
  first (what `core._inplace.readable` gates children with).
* `SwitchPublisher.poll` - at the driver's stop-poll cadence: the newest job model (the store
  reads only what is new); when it is newer than the published one and its expansion's snapshot
  is recorded, the expansions are read once and ``{version, job_model, snapshots}`` is written
  atomically to the switch file. The reader stats that file at each micro-batch's planning and
  reads it only when it changed; once it plans a batch on the new model it writes the version
  to the ``.reading`` file next to it, which `SwitchPublisher.reading` returns.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from airflow_samza_expand.core.model import JobModel

if TYPE_CHECKING:
    from airflow_samza_expand.store import CoordinatorStore
    from airflow_samza_expand.store._roles import ExpansionReader

log = logging.getLogger("airflow_samza_expand.spark._switch")

READING_SUFFIX = ".reading"


def snapshots_up_to(store: ExpansionReader, version: int) -> list[dict[str, dict[str, int]]] | None:
    """The barrier snapshots of the expansions to job models ``<= version``, oldest first; None
    when the expansion to ``version`` itself (if any) has no snapshot yet."""
    by_target: dict[int, Any] = {}
    for record in store.expansions():  # newest first: keep the newest record per target
        if record.target_version <= version and record.target_version not in by_target:
            if record.barrier:
                by_target[record.target_version] = record
            elif record.target_version == version:
                return None
    return [
        {t: {str(p): int(h) for p, h in ps.items()} for t, ps in by_target[v].barrier.items()}
        for v in sorted(by_target)
    ]


# statuses of an expansion record past its barrier (the barrier held)
PAST_BARRIER = frozenset(
    {"barrier-passed", "job-stopped", "job-model-written", "submitted", "completed"}
)


def barrier_passed(
    store: ExpansionReader, version: int, committed: dict[str, dict[str, int]] | None
) -> tuple[bool, str]:
    """In-app: whether job model ``version`` may be read by restarting the query
    (Spark's own source cannot gate a child partition by its parent, so the whole barrier must
    hold first): the expansion that made it has its snapshot ``H`` and either its record says
    the barrier passed or the job's own committed offsets (``committed``) reached ``H`` on every
    old partition. A job model no expansion made (written by hand) may be read at once.
    Returns (ready, why)."""
    made = [r for r in store.expansions() if r.target_version == version]
    if not made:
        return True, f"no expansion made job model v{version}"
    record = made[0]  # newest first
    if not record.barrier:
        return False, f"the barrier snapshot of expansion {record.expansion_id} is not taken yet"
    if str(record.status) in PAST_BARRIER:
        return True, f"expansion {record.expansion_id} is past its barrier ({record.status})"
    behind = {
        f"{t}:{p}": (int((committed or {}).get(t, {}).get(str(p), -1)), int(h))
        for t, ps in record.barrier.items()
        for p, h in ps.items()
        if int((committed or {}).get(t, {}).get(str(p), -1)) < int(h)
    }
    if behind:
        return False, f"committed offsets below the barrier snapshot (committed, H): {behind}"
    return True, f"the committed offsets reached expansion {record.expansion_id}'s snapshot"


def write_atomically(path: str, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader sees the old or the new content, whole."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def read_version(path: str) -> int | None:
    """The version number in ``path``; None when there is none yet."""
    try:
        with open(path, encoding="utf-8") as handle:
            return int(handle.read().strip() or 0) or None
    except (OSError, ValueError):
        return None


class SwitchPublisher:
    """Publishes newer job models to the running reader (module docstring)."""

    def __init__(
        self,
        store: CoordinatorStore,
        model: JobModel,
        path: str,
        store_lock: Any,
        rule_for: Callable[[JobModel], str | None] | None = None,
    ) -> None:
        self.store = store
        self.path = path
        self.lock = store_lock
        self.published = model.version
        self.rule_for = rule_for  # the order check's rule of a job model (JSON)

    def poll(self) -> int | None:
        """Publish the newest job model when it is newer and switchable; its version, or None."""
        with self.lock:
            newest = self.store.latest_job_model()
            if newest is None or newest.version <= self.published:
                return None
            snapshots = snapshots_up_to(self.store, newest.version)
        if snapshots is None:
            log.info(
                "job model v%d is written; its barrier snapshot is not: waiting", newest.version
            )
            return None
        doc = {"version": newest.version, "job_model": newest.to_json(), "snapshots": snapshots}
        if self.rule_for is not None:
            with self.lock:
                doc["order_check"] = self.rule_for(newest)
        write_atomically(self.path, json.dumps(doc, sort_keys=True))
        log.info(
            "switch in place: job model v%d published to the reader (snapshots %s)",
            newest.version,
            json.dumps(snapshots, sort_keys=True),
        )
        self.published = newest.version
        return newest.version

    def reading(self) -> int | None:
        """The job model version the reader plans batches on since a switch (None: none yet)."""
        return read_version(self.path + READING_SUFFIX)


class ReaderSwitch:
    """Reader side: the switch file's newest content, read only when the file changed."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.seen: int | None = None  # st_mtime_ns of the content last read

    def poll(self, version: int) -> tuple[JobModel, list[dict], Any] | None:
        """``(job model, snapshots, order-check rule or None)`` when the switch file names a
        version above ``version``."""
        if not self.path:
            return None
        try:
            stamp = os.stat(self.path).st_mtime_ns
        except FileNotFoundError:
            return None
        if stamp == self.seen:
            return None
        self.seen = stamp
        with open(self.path, encoding="utf-8") as handle:
            doc = json.load(handle)
        if int(doc["version"]) <= version:
            return None
        from airflow_samza_expand.spark._stale_batch import StaleRule

        rule = StaleRule.from_json(doc.get("order_check"))
        return JobModel.from_json(doc["job_model"]), list(doc["snapshots"]), rule

    def reading(self, version: int) -> None:
        """Tell the driver the reader plans batches on job model ``version`` now."""
        if self.path:
            write_atomically(self.path + READING_SUFFIX, str(version))


__all__ = [
    "READING_SUFFIX",
    "PAST_BARRIER",
    "ReaderSwitch",
    "SwitchPublisher",
    "barrier_passed",
    "read_version",
    "snapshots_up_to",
    "write_atomically",
]
