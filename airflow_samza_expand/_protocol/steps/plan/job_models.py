"""A job is expandable once it has a job model: refuse any other, naming the jobs that have one.

A mistyped job name must change nothing in Kafka (no coordinator topic created, no lease taken):
`require_job_model` reads the job's store (reading never creates the topic) before anything
writes, and its refusal names ``samza-expand init-job`` (how a new job gets v1) and the jobs
that do have a job model, the names close to the one asked first (`difflib`). The same words
are the UI's for a job page of a job without one (`no_job_model_message`).
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

from airflow_samza_expand.core.errors import ExpansionError
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store import CoordinatorStore

log = logging.getLogger(__name__)

INIT_JOB = "samza-expand init-job"
SHOWN_JOBS = 10  # names a message lists at most (close ones first)


class NoJobModelError(ExpansionError):
    """The job has no job model in its coordinator store: nothing to expand, nothing changed."""


def close_first(name: str, names: Iterable[str]) -> list[str]:
    """`names` (deduplicated), the ones close to `name` first (closest first), then the rest
    in order."""
    unique = sorted(set(names))
    close = difflib.get_close_matches(name, unique, n=3, cutoff=0.6)
    return close + [n for n in unique if n not in close]


def store_where(store: CoordinatorStore) -> str:
    """Where a store keeps the job's records, in words (no credentials)."""
    topic = getattr(store, "topic", None)
    if topic:
        return f"coordinator topic {topic}"
    location = getattr(store, "location", None)
    return f"coordinator store {location}" if location else "its coordinator store"


def no_job_model_message(
    job_name: str, where: str, jobs: Sequence[str] | None, *, changed: str = ""
) -> str:
    """One refusal for a job without a job model: what is missing, the jobs that have one
    (close names first; ``None``: not listed) and the command that writes v1."""
    out = f"job {job_name!r} has no job model ({where} holds none)"
    if changed:
        out += f": {changed}"
    if jobs is not None:
        ordered = close_first(job_name, jobs)
        close = difflib.get_close_matches(job_name, ordered, n=1, cutoff=0.6)
        if close:
            out += f". Did you mean {close[0]!r}?"
        shown = ordered[:SHOWN_JOBS]
        more = f" and {len(ordered) - len(shown)} more" if len(ordered) > len(shown) else ""
        out += (
            f" Jobs with a job model: {', '.join(shown)}{more}."
            if shown
            else " No job has a job model here yet."
        )
    else:
        out += "."
    return (
        out + f" A new job gets job model v1 from `{INIT_JOB} --bootstrap-servers <kafka> "
        f"--job-name {job_name} --topic <input topic>` (see docs/operations.md); then start it"
    )


def jobs_with_models(
    names: Iterable[str],
    open_job: Callable[[str], CoordinatorStore],
    *,
    exclude: str | None = None,
    limit: int = 3 * SHOWN_JOBS,
) -> list[str]:
    """The jobs among `names` whose store holds a job model (close names to `exclude` looked
    at first; at most `limit` stores opened). A store that cannot be read is left out."""
    order = close_first(exclude, names) if exclude else sorted(set(names))
    candidates = [n for n in order if n != exclude][:limit]
    if not candidates:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(candidates))) as pool:  # one read each
        has = list(pool.map(lambda name: _has_model(name, open_job), candidates))
    return [name for name, yes in zip(candidates, has, strict=True) if yes]


def _has_model(name: str, open_job: Callable[[str], CoordinatorStore]) -> bool:
    try:
        store = open_job(name)
    except ValueError:  # not a job name (a hand-made topic with the prefix)
        return False
    try:
        return store.latest_job_model() is not None
    except ExpansionError as exc:
        log.warning("Cannot read the job model of %s (%s): not listed.", name, exc)
        return False
    finally:
        store.close()


def require_job_model(
    store: CoordinatorStore, job_name: str, known_jobs: Callable[[], Sequence[str]] | None = None
) -> JobModel:
    """The job's newest job model; `NoJobModelError` (nothing written, nothing created) when it
    has none, naming the jobs `known_jobs()` lists (those with a job model)."""
    model = store.latest_job_model()
    if model is not None:
        return model
    jobs: Sequence[str] | None = None
    if known_jobs is not None:
        try:
            jobs = known_jobs()
        except ExpansionError as exc:
            log.warning("Cannot list the jobs with a job model (%s).", exc)
    raise NoJobModelError(
        no_job_model_message(
            job_name,
            store_where(store),
            jobs,
            changed="nothing to expand, and nothing was created or changed",
        )
    )


__all__ = [
    "INIT_JOB",
    "NoJobModelError",
    "close_first",
    "jobs_with_models",
    "no_job_model_message",
    "require_job_model",
]
