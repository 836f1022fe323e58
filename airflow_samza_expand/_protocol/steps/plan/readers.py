"""Who else reads a topic being grown, and whether the plan may go on without them.

Growing a topic changes it for every reader, not only for the job the plan is for:
another stateful job managed by this provider keeps running on a job model that does not cover
the new partitions, and a consumer group outside the provider that keeps keyed state sees keys
move. The plan step therefore finds

* the *managed jobs* reading the topic: jobs whose latest job model (in their coordinator store)
  includes it - the coordinator topics ``__samza_coordinator_<job>`` visible to the connection,
  or the directories of a local file store, or a configured list of job names;
* the *unmanaged consumer groups*: every other group with a committed offset on the topic
  (ListGroups, then OffsetFetch through a consumer: see `KafkaAdmin.group_offsets`), leaving
  out the managed jobs' groups and the provider's own internal groups.

`check_other_jobs` applies the ``other_jobs`` choice: ``"refuse"`` (default) and ``"include"``
refuse a growth while a managed job that this run does not expand reads the topic (``include``
is what the multi-job factory passes with the run's jobs); ``"ignore"`` goes on with a warning.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand.core._modes import OtherJobs
from airflow_samza_expand.core.errors import ExpansionError
from airflow_samza_expand.store import CoordinatorStore, open_store, store_location

log = logging.getLogger(__name__)

COORDINATOR_PREFIX = "__samza_coordinator_"
# Groups the provider itself uses (figures, partitioner sampling, demo verifier, store readers).
INTERNAL_GROUP_PREFIXES = ("samza-expand-", COORDINATOR_PREFIX)
OTHER_JOBS = OtherJobs.values()

OpenStore = Callable[[str], CoordinatorStore]


class OtherJobsReadTopicError(ExpansionError):
    """Other managed jobs read a topic this expansion grows, and the run does not expand them."""


@dataclass(frozen=True)
class TopicReaders:
    """Readers of each topic: managed jobs (by name) and unmanaged consumer groups."""

    managed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    unmanaged: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def jobs(self) -> list[str]:
        return sorted({j for names in self.managed.values() for j in names})

    def groups(self) -> list[str]:
        return sorted({g for names in self.unmanaged.values() for g in names})

    def to_dict(self) -> dict[str, Any]:
        return {
            "managed_jobs": {t: list(j) for t, j in sorted(self.managed.items())},
            "unmanaged_groups": {t: list(g) for t, g in sorted(self.unmanaged.items())},
        }


def normalise_other_jobs(value: Any) -> OtherJobs:
    """`OtherJobs` by name (None: ``refuse``); ValueError naming the value and the choices."""
    return OtherJobs.parse(value or OtherJobs.REFUSE, "other_jobs")


def managed_job_names(
    admin: KafkaAdmin, coordinator: str, configured: Iterable[str] | None = None
) -> list[str]:
    """Jobs whose coordinator store this connection can see (or the `configured` list)."""
    if configured is not None:
        return sorted(set(configured))
    kind, where = store_location(coordinator, admin.config)
    if kind == "kafka" and not where:
        return sorted(
            name[len(COORDINATOR_PREFIX) :]
            for name in admin.topic_names()
            if name.startswith(COORDINATOR_PREFIX) and len(name) > len(COORDINATOR_PREFIX)
        )
    if kind == "files" and os.path.isdir(where):
        return sorted(d for d in os.listdir(where) if os.path.isdir(os.path.join(where, d)))
    log.warning(
        "Coordinator store %s names one job's store: other managed jobs cannot be discovered "
        "- pass managed_jobs=[...] to check them.",
        coordinator,
    )
    return []


def _jobs_reading(names: Sequence[str], topics: Sequence[str], open_job: OpenStore) -> dict:
    managed: dict[str, list[str]] = {t: [] for t in topics}
    for name in names:
        try:
            store = open_job(name)
        except ValueError as exc:  # not a job name (a hand-made topic with the prefix)
            log.warning("Skipping coordinator store of %r: %s", name, exc)
            continue
        try:
            model = store.latest_job_model()
        except ExpansionError as exc:
            log.warning("Cannot read the job model of managed job %s (%s): skipped.", name, exc)
            continue
        finally:
            store.close()
        counts = model.partition_counts() if model is not None else {}
        for topic in topics:
            if topic in counts:
                managed[topic].append(name)
    return managed


def _groups_reading(
    admin: KafkaAdmin, topics: Sequence[str], excluded: set[str]
) -> dict[str, list[str]]:
    counts = admin.partition_counts(topics)
    wanted = {t: list(range(n)) for t, n in counts.items()}
    unmanaged: dict[str, list[str]] = {t: [] for t in topics}
    for group in admin.consumer_group_ids():
        if group in excluded or group.startswith(INTERNAL_GROUP_PREFIXES):
            continue
        committed = admin.group_offsets(group, wanted)
        for topic in topics:
            if any(o is not None for o in committed[topic].values()):
                unmanaged[topic].append(group)
    return unmanaged


def find_readers(
    admin: KafkaAdmin,
    topics: Sequence[str],
    *,
    coordinator: str = "kafka",
    open_job: OpenStore | None = None,
    managed_jobs: Iterable[str] | None = None,
    groups_of: Mapping[str, str] | None = None,
) -> TopicReaders:
    """Managed jobs and unmanaged consumer groups reading each of `topics` (module docstring).

    `open_job(name)` opens a job's coordinator store (default: `open_store(coordinator, name,
    admin.config)`); `groups_of` maps a job to its consumer group where it is not the job name.
    """
    opener = open_job or (lambda name: open_store(coordinator, name, admin.config))
    names = managed_job_names(admin, coordinator, managed_jobs)
    managed = _jobs_reading(names, list(topics), opener)
    excluded = {(groups_of or {}).get(j, j) for j in names} | set((groups_of or {}).values())
    unmanaged = _groups_reading(admin, list(topics), excluded)
    readers = TopicReaders(
        {t: tuple(sorted(j)) for t, j in managed.items()},
        {t: tuple(sorted(g)) for t, g in unmanaged.items()},
    )
    log.info(
        "Readers of %s: managed jobs %s; other consumer groups %s",
        ", ".join(topics),
        readers.jobs() or "none",
        readers.groups() or "none",
    )
    return readers


def check_other_jobs(
    job_name: str, readers: TopicReaders, other_jobs: str, co_jobs: Iterable[str] = ()
) -> list[str]:
    """Refuse (`OtherJobsReadTopicError`) or warn about managed jobs this run leaves behind;
    warn about unmanaged groups. Returns the warning lines (also logged)."""
    choice = normalise_other_jobs(other_jobs)
    included = {job_name, *co_jobs}
    left = [j for j in readers.jobs() if j not in included]
    topics = sorted(t for t, jobs in readers.managed.items() if set(jobs) - included)
    warnings = []
    if left and choice != "ignore":
        everyone = sorted(included | set(left))
        raise OtherJobsReadTopicError(
            f"topic(s) {', '.join(topics)} that this expansion of job {job_name!r} grows are "
            f"also read by managed job(s) {', '.join(left)}: growing them for "
            f"{', '.join(sorted(included))} alone leaves {', '.join(left)} on a job model that "
            f"never reads the new partitions - expand all of them in one run (factory "
            f"jobs={everyone!r}), or pass other_jobs='ignore' to grow anyway"
        )
    if left:
        warnings.append(
            f"other_jobs='ignore': managed job(s) {', '.join(left)} also read "
            f"{', '.join(topics)} and are NOT expanded by this run - they will not read the new "
            "partitions until they are expanded too"
        )
    for topic, groups in sorted(readers.unmanaged.items()):
        if groups:
            warnings.append(
                f"consumer group(s) outside this provider read {topic}: {', '.join(groups)} - "
                "a growth moves keys to new partitions; any keyed state they keep must follow"
            )
    for line in warnings:
        log.warning("%s", line)
    return warnings


def readers_doc(
    job_name: str,
    topics: Sequence[str],
    discover: Callable[[Sequence[str]], TopicReaders] | None,
    other_jobs: str,
    co_jobs: Iterable[str] = (),
) -> dict[str, Any]:
    """The plan's ``{"readers": {managed_jobs, unmanaged_groups, groups, warnings}}`` ({} when
    nothing discovers); refuses by `check_other_jobs`."""
    if discover is None:
        return {}
    found = discover(topics)
    warnings = check_other_jobs(job_name, found, other_jobs, co_jobs)
    return {"readers": found.to_dict() | {"groups": found.groups(), "warnings": warnings}}


__all__ = [
    "OTHER_JOBS",
    "OtherJobsReadTopicError",
    "TopicReaders",
    "check_other_jobs",
    "find_readers",
    "managed_job_names",
    "normalise_other_jobs",
    "readers_doc",
]
