"""Pure functions from job models and snapshots to what the pages and the JSON API show."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from airflow_samza_expand.airflow._ui.records import JobSnapshot
from airflow_samza_expand.airflow._ui.running import running_view
from airflow_samza_expand.airflow._ui.state_html import actions
from airflow_samza_expand.core._render import natural_key
from airflow_samza_expand.core.expansion import load_expansion_algorithm
from airflow_samza_expand.core.model import JobModel, SystemStreamPartition


@dataclass(frozen=True)
class MappingRow:
    """One SSP of a job model: its task and its bucket (partition at the initial count)."""

    system: str
    stream: str
    partition: int
    task: str
    bucket: int
    new: bool  # beyond the stream's initial count: added by an expansion


@dataclass(frozen=True)
class DiffRow:
    """An SSP whose task differs between two job models (added, removed or moved)."""

    ssp: str
    change: str  # "added", "removed", "moved"
    task_a: str | None
    task_b: str | None


def ssp_text(ssp: SystemStreamPartition) -> str:
    return f"[{ssp.system}, {ssp.stream}, {ssp.partition}]"


def mapping_rows(model: JobModel) -> list[MappingRow]:
    """Every SSP -> task of ``model`` by stream and partition; broadcast SSPs: "(every task)"."""
    algorithm = load_expansion_algorithm(model.expansion_algorithm)
    rows = []
    tasks = dict(model.ssp_to_task)
    for ssp in model.broadcast_ssps:
        tasks.setdefault(ssp, "(every task)")
    for ssp in sorted(tasks):
        s = model.stream(ssp.stream)
        bucket = algorithm.partition_before_expansion(ssp.partition, s.current, s.initial)
        rows.append(
            MappingRow(
                ssp.system,
                ssp.stream,
                ssp.partition,
                tasks[ssp],
                bucket,
                ssp.partition >= s.initial,
            )
        )
    return rows


def ranges_text(partitions: Iterable[int]) -> str:
    """Partitions as ranges: ``0-3, 8, 10-11`` (sorted, runs of consecutive ones joined)."""
    runs: list[list[int]] = []
    for p in sorted(partitions):
        if runs and p == runs[-1][1] + 1:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def tasks_summary(model: JobModel) -> list[tuple[str, str, str]]:
    """(task, the partitions it reads, those of them added by an expansion) for each task, in
    natural task order, as ranges per stream (``orders 0-1, 4-5``): a row per task, whatever the
    partition count."""
    reads: dict[str, dict[str, list[int]]] = {}
    for ssp, task in model.ssp_to_task.items():
        reads.setdefault(task, {}).setdefault(ssp.stream, []).append(ssp.partition)
    initial = {s.stream: s.initial for s in model.streams}

    def text(streams: dict[str, list[int]], only_new: bool = False) -> str:
        return "; ".join(
            f"{stream} {ranges_text(parts)}"
            for stream, parts in sorted(streams.items())
            for parts in [[p for p in parts if p >= initial[stream] or not only_new]]
            if parts
        )

    return [(t, text(reads[t]), text(reads[t], True)) for t in sorted(reads, key=natural_key)]


def diff_models(a: JobModel, b: JobModel) -> dict[str, Any]:
    """What changed from ``a`` to ``b``: partition counts, grouper, and each SSP's task."""
    counts_a, counts_b = a.partition_counts(), b.partition_counts()
    counts = [
        {"stream": s, "a": counts_a.get(s), "b": counts_b.get(s)}
        for s in sorted(set(counts_a) | set(counts_b))
        if counts_a.get(s) != counts_b.get(s)
    ]
    rows = []
    for ssp in sorted(set(a.ssp_to_task) | set(b.ssp_to_task)):
        ta, tb = a.ssp_to_task.get(ssp), b.ssp_to_task.get(ssp)
        if ta == tb:
            continue
        change = "added" if ta is None else "removed" if tb is None else "moved"
        rows.append(DiffRow(ssp_text(ssp), change, ta, tb))
    return {
        "a": a.version,
        "b": b.version,
        "counts": counts,
        "grouper": None if a.grouper == b.grouper else {"a": a.grouper, "b": b.grouper},
        "ssps": [asdict(r) for r in rows],
        "unchanged_ssps": len(set(a.ssp_to_task) & set(b.ssp_to_task))
        - sum(1 for r in rows if r.change == "moved"),
    }


def model_summary(model: JobModel) -> dict[str, Any]:
    return {
        "version": model.version,
        "created_at": model.created_at,
        "created_by": model.created_by,
        "grouper": model.grouper,
        "partition_counts": model.partition_counts(),
        "tasks": len(model.tasks()),
    }


def model_json(model: JobModel) -> dict[str, Any]:
    """A job model with its mapping rows (JSON API)."""
    return {
        **model_summary(model),
        "job_name": model.job_name,
        "expansion_algorithm": model.expansion_algorithm,
        "mapping": [asdict(r) for r in mapping_rows(model)],
    }


def stop_request_view(snapshot: JobSnapshot) -> dict[str, Any] | None:
    """The stop request as text, and whether it is in force: a stop for vN stops the processors
    of vN and older, so it no longer applies once a newer job model exists or a live processor
    runs one."""
    stop = snapshot.stop_request
    if not stop:
        return None
    raw = stop.get("version")
    version = raw if isinstance(raw, int) and not isinstance(raw, bool) else None
    reason = str(stop.get("reason") or "no reason given")
    at = stop.get("requested_at")
    newer = max((m.version for m in snapshot.history), default=0)
    runs = [
        p.processor_id
        for p in snapshot.processors
        if p.alive and version is not None and (p.job_model_version or 0) > version
    ]
    what = f"stop of job model v{version} and older" if version else "stop request (no version)"
    said = f"{what}, requested at {at or 'an unknown time'}: {reason}"
    if version is None:
        in_force, text = False, f"Unreadable {said} - it stops no processor"
    elif newer > version:
        in_force, text = False, f"The last {said}. It no longer applies: job model v{newer} exists"
    elif runs:
        in_force = False
        text = f"The last {said}. It no longer applies: {', '.join(runs)} runs a later version"
    else:
        in_force, text = True, f"Stop request in force: {said}"
    return {
        "version": version,
        "reason": reason,
        "requested_at": at,
        "in_force": in_force,
        "text": text,
    }


def snapshot_json(snapshot: JobSnapshot) -> dict[str, Any]:
    """The job page's data as JSON (the plugin's ``/api/jobs/<job>``)."""
    latest = snapshot.latest
    return {
        "job": snapshot.job,
        "store": snapshot.store,
        "job_model": model_json(latest) if latest is not None else None,
        "history": [model_summary(m) for m in reversed(snapshot.history)],
        "live_partition_counts": snapshot.live_counts,
        "expansions": [
            {
                **asdict(e),
                "barrier": {t: {str(p): o for p, o in ps.items()} for t, ps in e.barrier.items()},
            }
            for e in snapshot.expansions
        ],
        "barrier": {
            "expansion_id": snapshot.barrier_of,
            "partitions": [asdict(r) for r in snapshot.barrier_rows],
            "total_lag": sum(r.lag for r in snapshot.barrier_rows),
        },
        "processors": [asdict(p) for p in snapshot.processors],
        "leases": None if snapshot.leases is None else [asdict(x) for x in snapshot.leases],
        "stop_request": stop_request_view(snapshot),
        "running": running_view(snapshot),
        # the operator's next actions, most urgent first: `samza-expand status`'s "next:"
        "next": [a.to_dict() for a in actions(snapshot)],
        "log": None if snapshot.log is None else asdict(snapshot.log),
        "problems": list(snapshot.problems),
    }
