"""Every read the UI makes: coordinator store, Kafka metadata and offsets, the restarted job's log.

This is the one module that knows the store's read API (`parts` builds rows from what it read;
`airflow_tasks` reads Airflow's task instances), so a change of that API is a change
here only. Each function returns typed records (below) or raises `UiProblem`, whose status and
message the pages show instead of a stack trace:

* unknown job (no coordinator records, bad name) -> 404;
* unreachable Kafka / no connection -> 503 (a retry may help);
* corrupt coordinator record -> 422 (naming topic, offset and key, and the fix).

A fault in one part of a job (a corrupt expansion record, an unreachable group) is kept as a
`problems` line of the snapshot and the other parts still show.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from airflow_samza_expand._protocol.status.job_status import JobStatus, draining
from airflow_samza_expand.airflow._ui.airflow_tasks import with_tasks
from airflow_samza_expand.airflow._ui.decode import expansion_of
from airflow_samza_expand.airflow._ui.parts import (
    expansion_ids,
    lease_rows,
    log_tail,
    processor_rows,
)
from airflow_samza_expand.airflow._ui.records import (
    BarrierRow,
    Expansion,
    JobRef,
    JobSnapshot,
    UiProblem,
)
from airflow_samza_expand.airflow._ui.settings import UiSettings
from airflow_samza_expand.core._lease import Lease
from airflow_samza_expand.core._liveness import statuses
from airflow_samza_expand.core.errors import (
    CorruptCoordinatorRecordError,
    ExpansionError,
    InvalidJobModelError,
    KafkaAuthenticationError,
)
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store import uses_kafka

if TYPE_CHECKING:
    from airflow_samza_expand._kafka.admin import KafkaAdmin
    from airflow_samza_expand.core._record import ExpansionRecord
    from airflow_samza_expand.store import CoordinatorStore

COORDINATOR_PREFIX = "__samza_coordinator_"
# the active lease of a job is its Kafka consumer group membership, no store record
LEASE_NAMES = ("expansion",)
TASKS_OF_NEWEST = 10  # expansions whose DAG run's task instances a page reads; older: the record
T = TypeVar("T")


# -- faults ------------------------------------------------------------------------------------


def _problem_of(exc: BaseException, what: str) -> UiProblem:
    from airflow_samza_expand._kafka.admin import KafkaUnavailableError

    if isinstance(exc, UiProblem):
        return exc
    if isinstance(exc, KafkaUnavailableError):
        return UiProblem(503, "Kafka is unreachable", f"{what}: {exc}")
    if isinstance(exc, KafkaAuthenticationError):
        return UiProblem(503, "Kafka refused the credentials", f"{what}: {exc}")
    if isinstance(exc, (CorruptCoordinatorRecordError, InvalidJobModelError)):
        return UiProblem(422, "Corrupt coordinator record", f"{what}: {exc}")
    if isinstance(exc, ExpansionError):
        return UiProblem(422, "Coordinator store refused the read", f"{what}: {exc}")
    if isinstance(exc, ValueError):
        return UiProblem(400, "Bad input", f"{what}: {exc}")
    return UiProblem(
        503,
        "Read failed",
        f"{what}: {type(exc).__name__}: {exc} - check the Kafka connection and the broker, "
        "then reload",
    )


@contextlib.contextmanager
def _as_problem(what: str) -> Iterator[None]:
    try:
        yield
    except Exception as exc:  # every fault becomes a message, never a stack trace
        raise _problem_of(exc, what) from exc


def _part(snapshot: JobSnapshot, what: str, read: Callable[[], T], default: T) -> T:
    """Read one part of the page; a fault becomes a problem line and the default."""
    try:
        return read()
    except Exception as exc:
        snapshot.problems.append(_problem_of(exc, what).message)
        return default


# -- clients -----------------------------------------------------------------------------------


def kafka_config(settings: UiSettings) -> dict[str, Any]:
    """The librdkafka config of the configured Airflow connection (UiProblem 503 if missing)."""
    from airflow_samza_expand.airflow._compat import kafka_connection_config
    from airflow_samza_expand.airflow.hooks import SamzaExpandKafkaHook

    with _as_problem(f"reading Airflow connection {settings.kafka_config_id!r}"):
        try:  # not client_config(): a page fetched every few seconds logs no connection line
            hook = SamzaExpandKafkaHook(kafka_config_id=settings.kafka_config_id)
            config = kafka_connection_config(hook)
        except Exception as exc:
            if "isn't defined" in str(exc) or "not found" in str(exc).lower():
                raise UiProblem(
                    503,
                    "No Kafka connection",
                    f"Airflow connection {settings.kafka_config_id!r} is not defined - create it "
                    '(type kafka, extra {"bootstrap.servers": ...}) or set '
                    "[samza_expand] ui_kafka_config_id",
                ) from exc
            raise
    # a page must not hang on a dead broker: bound librdkafka's own waits too
    timeout_ms = str(int(settings.timeout_s * 1000))
    config.setdefault("socket.timeout.ms", timeout_ms)
    return config


def _open_store(
    settings: UiSettings, job: str, config: Mapping[str, Any] | None
) -> CoordinatorStore:
    from airflow_samza_expand.store import open_store

    return open_store(settings.coordinator, job, config, timeout_s=settings.timeout_s)


def describe_store(store: object) -> str:
    """Where a coordinator store keeps its records, in words (no credentials, no config)."""
    from airflow_samza_expand._kafka.config import bootstrap_of

    config = getattr(store, "config", None)
    if isinstance(config, Mapping) and getattr(store, "topic", None):
        return f"Kafka topic {store.topic} on {bootstrap_of(config)}"
    location = getattr(store, "location", None)
    if location:
        parts = urlsplit(str(location))
        if parts.netloc and "@" in parts.netloc:  # user:password@host: keep the host only
            parts = parts._replace(netloc=parts.netloc.rsplit("@", 1)[1])
        return f"files in {urlunsplit(parts)}"
    return f"a {type(store).__name__}"


def _admin(settings: UiSettings, config: Mapping[str, Any]) -> KafkaAdmin:
    from airflow_samza_expand._kafka.admin import KafkaAdmin

    return KafkaAdmin(config, timeout_s=settings.timeout_s)


def _close(*clients: Any) -> None:
    for client in clients:
        with contextlib.suppress(Exception):
            client.close()


# -- jobs --------------------------------------------------------------------------------------


def list_jobs(settings: UiSettings) -> tuple[list[JobRef], list[str]]:
    """Configured jobs plus the jobs of the connection's coordinator topics that hold a job
    model (when discovering: a topic holding none, e.g. left by a mistyped plan of an older
    version, is no job), and the problems met: configured jobs still show when Kafka cannot be
    listed."""
    sources: dict[str, list[str]] = {name: ["configured"] for name in settings.jobs}
    problems: list[str] = []
    try:
        for name in discovered_jobs(settings):
            sources.setdefault(name, []).append("coordinator topic")
    except UiProblem as problem:
        problems.append(f"{problem.title}: {problem.message}")
    return [JobRef(name, tuple(src)) for name, src in sorted(sources.items())], problems


def discovered_jobs(settings: UiSettings, *, near: str | None = None) -> list[str]:
    """The jobs whose coordinator topic holds a job model (none unless discovering on Kafka);
    `near`: those close to that name first. UiProblem when Kafka cannot be listed."""
    from airflow_samza_expand._protocol.steps.plan.job_models import jobs_with_models

    if not (settings.discover and settings.coordinator == "kafka"):
        return []
    config = kafka_config(settings)
    admin = _admin(settings, config)
    try:
        with _as_problem("listing the coordinator topics"):
            topics = admin.topic_names()
    finally:
        _close(admin)
    names = [
        topic[len(COORDINATOR_PREFIX) :]
        for topic in topics
        if topic.startswith(COORDINATOR_PREFIX) and len(topic) > len(COORDINATOR_PREFIX)
    ]
    with _as_problem("reading the coordinator topics"):
        return jobs_with_models(
            names, lambda name: _open_store(settings, name, config), exclude=near, limit=len(names)
        )


def read_job(settings: UiSettings, job: str) -> JobSnapshot:
    """Everything the job page shows. UiProblem when the job cannot be shown at all."""
    from airflow_samza_expand.store import coordinator_topic

    with _as_problem(f"job {job!r}"):
        coordinator_topic(job)  # ValueError names an impossible job name
    config = kafka_config(settings) if uses_kafka(settings.coordinator) else None
    store = _open_store(settings, job, config)
    admin = _admin(settings, config) if config is not None else None
    try:
        where = describe_store(store)
        with _as_problem(f"reading the job models of {job!r} from {where}"):
            history = list(store.job_model_history())
        snapshot = JobSnapshot(job=job, store=where, history=history)
        raw = _part(snapshot, "reading processor heartbeats", store.processors, {})
        snapshot.processors = processor_rows(raw, settings)
        snapshot.stop_request = _part(
            snapshot, "reading the stop request", store.stop_request, None
        )
        if not history and not snapshot.processors and job not in settings.jobs:
            raise UiProblem(404, "Unknown job", _unknown_job(settings, job, where))
        leases = _part(snapshot, "reading the leases", lambda: _leases(store), None)
        snapshot.leases = None if leases is None else lease_rows(leases)
        if admin is not None and history:
            snapshot.live_counts = _part(
                snapshot,
                "reading the live partition counts",
                lambda: admin.partition_counts(sorted(history[-1].partition_counts())),
                {},
            )
        typed = _part(snapshot, "reading the expansion records", store.expansions, None)
        if typed is not None:
            snapshot.expansions = _part(
                snapshot,
                "reading the expansion records",
                lambda: _expansions(store, job, history, snapshot.live_counts, typed),
                [],
            )
        snapshot.expansions = [  # Airflow's task instances of the newest few (one query each)
            with_tasks(e) if i < TASKS_OF_NEWEST else e for i, e in enumerate(snapshot.expansions)
        ]
        lag = _barrier(snapshot, admin, snapshot.consumer_group, typed or [])
        snapshot.status = JobStatus(
            job_name=job,
            store=where,
            models=history,
            processors=sorted(statuses(raw).values(), key=lambda p: p.processor_id),
            leases=leases or [],
            stop=snapshot.stop_request,
            expansions=typed or [],
            live_counts=snapshot.live_counts,
            barrier_lag=lag,
            barrier_of=snapshot.barrier_of,
        )
        snapshot.log = _part(
            snapshot, "reading the job log", lambda: log_tail(snapshot, settings), None
        )
        return snapshot
    finally:
        _close(store, *([admin] if admin is not None else []))


def _unknown_job(settings: UiSettings, job: str, where: str) -> str:
    """The plan step's words for a job without a job model
    (`_protocol.steps.plan.job_models`), naming the jobs that have one, close names first."""
    from airflow_samza_expand._protocol.steps.plan.job_models import no_job_model_message

    try:
        jobs: list[str] | None = discovered_jobs(settings, near=job) if settings.discover else None
    except UiProblem:
        jobs = None
    if jobs is not None and settings.jobs:
        jobs = [*jobs, *(j for j in settings.jobs if j not in jobs and j != job)]
    return no_job_model_message(job, where, jobs, changed="no processor either")


# -- parts -------------------------------------------------------------------------------------


def _leases(store: CoordinatorStore) -> list[Lease] | None:
    get_lease = getattr(store, "get_lease", None)
    if get_lease is None:
        return None  # this store version keeps no leases
    return [lease for lease in map(get_lease, LEASE_NAMES) if lease is not None]


def _expansions(
    store: CoordinatorStore,
    job: str,
    history: Sequence[JobModel],
    live: Mapping[str, int],
    typed: Sequence[ExpansionRecord],
) -> list[Expansion]:
    """Typed records (``store.expansions()``, newest first), then the expansions behind the job
    model history that are still dict documents of the legacy ``put_expansion(id, dict)`` API
    (``get_expansion_doc``; the typed listing does not see them)."""
    found = [expansion_of(r.expansion_id, r) for r in typed]
    legacy = getattr(store, "get_expansion_doc", None)
    if legacy is None:
        return found
    seen = {e.expansion_id for e in found}
    for expansion_id in expansion_ids(job, history, live):
        if expansion_id in seen:
            continue
        try:
            record = store.get_expansion(expansion_id)
        except CorruptCoordinatorRecordError:  # a legacy document is no typed record
            record = None
        record = record if record is not None else legacy(expansion_id)
        if record is not None:
            found.append(expansion_of(expansion_id, record))
    return found


def _barrier(
    snapshot: JobSnapshot,
    admin: KafkaAdmin | None,
    group: str,
    typed: Sequence[ExpansionRecord],
) -> dict[str, dict[int, int]] | None:
    """Lag per old partition against the barrier of the current expansion, read only while it
    waits there for the job to drain (`status.draining`): a barrier that passed, or an earlier
    expansion's, is history and shows from its record alone."""
    from airflow_samza_expand._protocol.barrier.reads import barrier_status

    current = draining(typed)
    if current is None or admin is None:
        return None
    status = _part(
        snapshot,
        f"reading the committed offsets of group {group!r}",
        lambda: barrier_status(admin, group, current.barrier),
        None,
    )
    if status is None:
        return None
    snapshot.barrier_of = current.expansion_id
    snapshot.barrier_rows = [
        BarrierRow(t, p, offset, status.committed[t][p], status.lag[t][p])
        for t, ps in sorted(status.barrier.items())
        for p, offset in sorted(ps.items())
    ]
    return status.lag


__all__ = ["JobSnapshot", "UiProblem", "kafka_config", "list_jobs", "read_job"]
