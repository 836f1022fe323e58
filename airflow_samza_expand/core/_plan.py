"""The expansion plan: which streams grow, the new SSPs, job model vN+1, the barrier SSPs.

`plan_expansion` is pure and deterministic: the same inputs (including ``created_at``) give an
equal plan and byte-identical ``to_json()``. ``to_dict``/``from_dict`` round-trip the plan
through XCom.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_samza_expand.core._clock import now_iso
from airflow_samza_expand.core.errors import (
    ExpansionError,
    InvalidJobModelError,
    MaxPartitionsError,
)
from airflow_samza_expand.core.expansion import load_expansion_algorithm, validate_growth
from airflow_samza_expand.core.groupers import grouper_by_name
from airflow_samza_expand.core.model import (
    JobModel,
    StreamPartitionCounts,
    SystemStreamPartition,
    mapping_from_groups,
)

PLAN_FORMAT = 1
# The largest partition count a plan accepts unless told otherwise. Kafka itself accepts more,
# but a job model (and every barrier poll) grows with it; raise it with max_partitions=...
DEFAULT_MAX_PARTITIONS = 4096


@dataclass(frozen=True, order=True)
class SspMove:
    """An SSP whose task changes: a new partition (``from_task`` None) or a moved one.

    ``keys_from`` is the old partition whose keys the SSP may now receive (``p % old count``).
    """

    ssp: SystemStreamPartition
    from_task: str | None
    to_task: str
    keys_from: SystemStreamPartition

    def to_dict(self) -> dict[str, Any]:
        return {
            "from_task": self.from_task,
            "keys_from": _ssp_list(self.keys_from),
            "ssp": _ssp_list(self.ssp),
            "to_task": self.to_task,
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> SspMove:
        return cls(
            ssp=_ssp_from(doc["ssp"]),
            from_task=doc["from_task"],
            to_task=doc["to_task"],
            keys_from=_ssp_from(doc["keys_from"]),
        )


@dataclass(frozen=True)
class ExpansionPlan:
    """What an expansion will do; ``new_job_model`` is version ``old_version + 1``."""

    job_name: str
    old_version: int
    streams_grown: tuple[str, ...]
    counts_before: Mapping[str, int]
    counts_after: Mapping[str, int]
    new_ssps: tuple[SystemStreamPartition, ...]
    barrier_ssps: tuple[SystemStreamPartition, ...]
    moved: tuple[SspMove, ...]
    new_job_model: JobModel
    require_power_of_two: bool = True

    @property
    def new_version(self) -> int:
        return self.new_job_model.version

    def grown_counts(self) -> dict[str, tuple[int, int]]:
        """Stream -> (count before, count after) for the streams that grow."""
        return {s: (self.counts_before[s], self.counts_after[s]) for s in self.streams_grown}

    def to_dict(self) -> dict[str, Any]:
        """JSON-able and deterministic (sorted lists, the model as its JSON document)."""
        return {
            "barrier_ssps": [_ssp_list(s) for s in self.barrier_ssps],
            "counts_after": dict(sorted(self.counts_after.items())),
            "counts_before": dict(sorted(self.counts_before.items())),
            "format": PLAN_FORMAT,
            "job_name": self.job_name,
            "moved": [m.to_dict() for m in self.moved],
            "new_job_model": self.new_job_model.to_dict(),
            "new_ssps": [_ssp_list(s) for s in self.new_ssps],
            "new_version": self.new_version,
            "old_version": self.old_version,
            "require_power_of_two": self.require_power_of_two,
            "streams_grown": list(self.streams_grown),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> ExpansionPlan:
        """Inverse of `to_dict`; `InvalidJobModelError` on a malformed document."""
        try:
            if doc.get("format") != PLAN_FORMAT:
                raise InvalidJobModelError(
                    f"expansion plan format must be {PLAN_FORMAT}, got {doc.get('format')!r}"
                )
            return cls(
                job_name=doc["job_name"],
                old_version=int(doc["old_version"]),
                streams_grown=tuple(doc["streams_grown"]),
                counts_before={k: int(v) for k, v in doc["counts_before"].items()},
                counts_after={k: int(v) for k, v in doc["counts_after"].items()},
                new_ssps=tuple(_ssp_from(s) for s in doc["new_ssps"]),
                barrier_ssps=tuple(_ssp_from(s) for s in doc["barrier_ssps"]),
                moved=tuple(SspMove.from_dict(m) for m in doc["moved"]),
                new_job_model=JobModel.from_dict(doc["new_job_model"]),
                require_power_of_two=bool(doc.get("require_power_of_two", True)),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InvalidJobModelError(
                f"expansion plan document is malformed ({type(exc).__name__}: {exc}) - pass "
                "the output of ExpansionPlan.to_dict()"
            ) from None

    @classmethod
    def from_json(cls, text: str | bytes) -> ExpansionPlan:
        return cls.from_dict(json.loads(text))


def _ssp_list(ssp: SystemStreamPartition) -> list[Any]:
    return [ssp.system, ssp.stream, ssp.partition]


def _ssp_from(raw: Any) -> SystemStreamPartition:
    system, stream, partition = raw
    if not isinstance(partition, int) or isinstance(partition, bool):
        raise ValueError(f"SSP partition must be an integer, got {partition!r}")
    return SystemStreamPartition(str(system), str(stream), partition)


def _check_cluster_counts(
    model: JobModel, partition_counts: Mapping[str, int], targets: Mapping[str, int]
) -> None:
    """The cluster's counts must be the model's, or (for a grown stream) already the target."""
    for s in model.streams:
        actual = partition_counts.get(s.stream)
        if actual is None:
            raise ExpansionError(
                f"no partition count given for stream '{s.stream}' of job '{model.job_name}' - "
                "pass the cluster's count of every input stream"
            )
        if actual == s.current:
            continue
        target = targets.get(s.stream)
        if target is not None and actual == target:
            continue  # a previous run already added the partitions; the rest still applies
        if target is None and actual > s.current:
            fix = f"add the target {s.stream}={actual} so the job reads the new partitions"
        else:
            fix = "inspect the topic; the job model and the cluster disagree"
        raise ExpansionError(
            f"stream '{s.stream}' has {actual} partitions on the cluster but job model "
            f"v{model.version} of '{model.job_name}' says {s.current} - {fix}"
        )


def check_max_partitions(job_name: str, targets: Mapping[str, int], max_partitions: int) -> None:
    """MaxPartitionsError naming the target, the limit and the fix (no per-partition work)."""
    if (
        isinstance(max_partitions, bool)
        or not isinstance(max_partitions, int)
        or max_partitions < 1
    ):
        raise ExpansionError(f"max_partitions must be a positive integer, got {max_partitions!r}")
    for stream, target in sorted(targets.items()):
        if isinstance(target, int) and not isinstance(target, bool) and target > max_partitions:
            raise MaxPartitionsError(
                f"stream '{stream}' of job '{job_name}': target {target} partitions is above "
                f"max_partitions={max_partitions} - choose a smaller target, or raise "
                f"max_partitions if the brokers and the job really should carry {target}"
            )


def plan_expansion(
    job_model: JobModel,
    partition_counts: Mapping[str, int] | None,
    targets: Mapping[str, int],
    *,
    require_power_of_two: bool = True,
    created_at: str | None = None,
    created_by: str | None = None,
    allow_state_breaking_grouper: bool = False,
    max_partitions: int = DEFAULT_MAX_PARTITIONS,
) -> ExpansionPlan:
    """Plan growing ``targets`` (stream -> new count) of a job at ``job_model``.

    ``partition_counts`` is the cluster's current count per stream (``None``: the model's).
    A target above ``max_partitions`` (default `DEFAULT_MAX_PARTITIONS`) is refused with
    `MaxPartitionsError` before any per-partition work.
    Raises `ExpansionError` subclasses for every refusal; changes nothing.
    """
    model = job_model
    if not targets:
        raise ExpansionError(
            "no target given - name the streams to grow, e.g. "
            + ", ".join(f"{s.stream}={s.current * 2}" for s in model.streams)
        )
    known = {s.stream: s for s in model.streams}
    for stream in sorted(targets):
        if stream not in known:
            raise ExpansionError(
                f"stream '{stream}' is not an input of job '{model.job_name}' (its streams: "
                f"{', '.join(sorted(known))}) - target one of those"
            )
    check_max_partitions(model.job_name, targets, max_partitions)
    counts = dict(partition_counts) if partition_counts is not None else model.partition_counts()
    _check_cluster_counts(model, counts, targets)
    for stream in sorted(targets):
        validate_growth(
            stream,
            known[stream].current,
            targets[stream],
            require_power_of_two=require_power_of_two,
        )
    grouper_cls = type(grouper_by_name(model.grouper))  # also Samza factory class names
    if not grouper_cls.keeps_state_on_expansion and not allow_state_breaking_grouper:
        raise ExpansionError(
            f"job '{model.job_name}' uses grouper {model.grouper}, which gives new partitions "
            "new tasks, so keys leave the task holding their state - switch the job to "
            f"{grouper_cls.name}FixedTasks first"
        )
    broadcast_streams = {(s.system, s.stream) for s in model.broadcast_ssps}
    for stream in sorted(targets):
        s = known[stream]
        if (s.system, s.stream) in broadcast_streams:
            raise ExpansionError(
                f"stream '{stream}' has broadcast partitions; expanding a broadcast stream is "
                "not supported - stop broadcasting it first"
            )

    streams = tuple(
        StreamPartitionCounts(s.system, s.stream, targets.get(s.stream, s.current), s.initial)
        for s in model.streams
    )
    all_ssps = [
        SystemStreamPartition(s.system, s.stream, p) for s in streams for p in range(s.current)
    ]
    grouper = grouper_by_name(
        model.grouper,
        broadcast_ssps=model.broadcast_ssps,
        algorithm=load_expansion_algorithm(model.expansion_algorithm),
        initial_counts={(s.system, s.stream): s.initial for s in model.streams},
    )
    groups = grouper.group(all_ssps, model.ssp_to_task)
    new_mapping = mapping_from_groups(groups, model.broadcast_ssps)
    new_model = JobModel(
        version=model.version + 1,
        job_name=model.job_name,
        streams=streams,
        ssp_to_task=new_mapping,
        grouper=model.grouper,
        expansion_algorithm=model.expansion_algorithm,
        created_at=created_at or now_iso(),
        created_by=created_by or model.created_by,
        broadcast_ssps=model.broadcast_ssps,
    )
    grown = tuple(sorted(targets))
    before = {s.stream: s.current for s in model.streams}
    old_mapping = model.ssp_to_task
    moved = []
    for ssp, task in new_mapping.items():
        old_task = old_mapping.get(ssp)
        if old_task != task:
            old_count = before[ssp.stream]
            keys_from = SystemStreamPartition(ssp.system, ssp.stream, ssp.partition % old_count)
            moved.append(SspMove(ssp, old_task, task, keys_from))
    new_ssps = tuple(sorted(ssp for ssp in new_mapping if ssp not in old_mapping))
    barrier = tuple(
        sorted(
            SystemStreamPartition(s.system, s.stream, p)
            for s in model.streams
            if s.stream in targets
            for p in range(s.current)
        )
    )
    return ExpansionPlan(
        job_name=model.job_name,
        old_version=model.version,
        streams_grown=grown,
        counts_before=dict(sorted(before.items())),
        counts_after=new_model.partition_counts(),
        new_ssps=new_ssps,
        barrier_ssps=barrier,
        moved=tuple(sorted(moved)),
        new_job_model=new_model,
        require_power_of_two=require_power_of_two,
    )


__all__ = [
    "DEFAULT_MAX_PARTITIONS",
    "ExpansionPlan",
    "SspMove",
    "check_max_partitions",
    "plan_expansion",
]
