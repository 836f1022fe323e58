"""What an operator does next about a job: the one decision behind ``samza-expand status``'s
"next:" lines and the job page's top line (one function, two views).

`next_actions` reads a `status.JobStatus` (the coordinator records, Kafka's live partition counts
and, while the current expansion waits at its barrier, the job's lag there) and returns the
actions most urgent first, each with a `kind`: ``no-model``, ``failed``, ``job-down``,
``barrier-blocked``, ``waiting``, ``attention`` or ``well``. Pure: no store, no Kafka."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow_samza_expand._protocol.restart import strategy_of
from airflow_samza_expand.core._clock import parse_iso, utc_now
from airflow_samza_expand.core._lease import EXPANSION_LEASE
from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus

if TYPE_CHECKING:
    from airflow_samza_expand._protocol.status.job_status import JobStatus

S = ExpansionStatus
DONE = frozenset({S.COMPLETED, S.FAILED})
URGENT = frozenset({"no-model", "failed", "job-down", "barrier-blocked", "attention"})
STALE_AFTER_S = 600.0  # an expansion nobody updated for this long has no run working on it


@dataclass(frozen=True)
class NextAction:
    """One thing to do (or to wait for): its kind and its sentence."""

    kind: str
    text: str

    @property
    def urgent(self) -> bool:
        """The operator must act (not only wait, nor nothing to do)."""
        return self.kind in URGENT

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "urgent": self.urgent}


def current_expansion(status: JobStatus) -> ExpansionRecord | None:
    """The newest expansion neither completed nor failed: the one whose barrier is current."""
    return next((r for r in status.expansions if r.status not in DONE), None)


def _down_by_design(record: ExpansionRecord) -> bool:
    """Between its stop and its ack a (cold) restart runs no processor on purpose."""
    stop, ack = record.steps.get("stop"), record.steps.get("ack")
    return bool(stop and stop.ended_at) and not (ack and ack.ended_at)


def current_step(record: ExpansionRecord) -> str | None:
    """The step under way (started, not ended), else the step that ended last."""
    running = [(t.started_at or "", n) for n, t in record.steps.items() if not t.ended_at]
    if running:
        return f"{max(running)[1]} (running)"
    ended = [(t.ended_at or "", n) for n, t in record.steps.items() if t.ended_at]
    return f"{max(ended)[1]} (ended)" if ended else None


def next_actions(status: JobStatus, now: datetime | None = None) -> list[NextAction]:
    """What an operator does next, most urgent first (always at least one)."""
    now = now or utc_now()
    job, latest = status.job_name, status.latest
    if latest is None:
        return [
            NextAction(
                "no-model",
                f"job {job} has no job model: write v1 with `samza-expand init-job --job-name "
                f"{job} --topic <input topic> --bootstrap-servers <kafka>`, then start the job",
            )
        ]
    open_ones = [r for r in status.expansions if r.status != S.COMPLETED]
    live = [p for p in status.processors if p.alive(now) and p.state not in ("stopped", "failed")]
    actions = [_expansion_action(r, status, now) for r in open_ones]
    if not live and not any(_down_by_design(r) for r in open_ones):
        actions.append(
            NextAction(
                "job-down",
                f"no processor of job {job} runs: start the job (it reads job model "
                f"v{latest.version})",
            )
        )
    dead = [p.processor_id for p in status.processors if p.dead(now)]
    if dead:
        actions.append(
            NextAction(
                "attention",
                f"processor(s) {', '.join(dead)} went silent: restart them if they should run "
                "(their records are removed by the next stop step or job start)",
            )
        )
    if status.stop and any(p.job_model_version == status.stop.get("version") for p in live):
        actions.append(
            NextAction(
                "waiting",
                f"a stop of v{status.stop.get('version')} is requested: its processors stop at "
                "their next batch",
            )
        )
    if not open_ones:
        actions += _outside_expansions(status, live)
    order = {"failed": 0, "job-down": 1, "barrier-blocked": 2, "attention": 3}
    actions.sort(key=lambda a: order.get(a.kind, 4))  # stable: the expansions' order kept
    return actions or [
        NextAction(
            "well",
            f"nothing to do: job {job} runs job model v{latest.version}. To grow an input topic, "
            "trigger the job's expansion DAG (its trigger form asks for the growth factor)",
        )
    ]


def _outside_expansions(status: JobStatus, live: list[Any]) -> list[NextAction]:
    """Processors on an older job model, a topic grown by hand (no expansion open)."""
    latest = status.latest
    assert latest is not None
    out = []
    old = sorted({str(p.job_model_version) for p in live if p.job_model_version != latest.version})
    if old:
        out.append(
            NextAction(
                "attention",
                f"processors run v{', v'.join(old)}, older than the newest v{latest.version}: "
                "restart them (a job on the runtime takes the newest job model when it starts)",
            )
        )
    counts = latest.partition_counts()
    grown = {s: n for s, n in status.live_counts.items() if n != counts.get(s, n)}
    if grown:
        out.append(
            NextAction(
                "attention",
                f"input topic(s) {grown} grew outside an expansion (job model v{latest.version} "
                f"reads {counts}): the new partitions are not read - trigger the expansion DAG "
                "with those counts as targets",
            )
        )
    return out


def _last_failure(record: ExpansionRecord) -> Mapping[str, Any] | None:
    failures = [f for f in record.results.get("failures") or [] if isinstance(f, Mapping)]
    return failures[-1] if failures else None


def _expansion_action(r: ExpansionRecord, status: JobStatus, now: datetime) -> NextAction:
    lease = next((x for x in status.leases if x.name == EXPANSION_LEASE), None)
    held = lease is not None and not lease.expired(now) and not lease.released
    where = f"expansion {r.expansion_id} ({r.status.value}, step {current_step(r) or '-'})"
    failure = _last_failure(r)
    if r.status == S.FAILED or (failure and not held):
        said = f": {failure.get('step')} failed at {failure.get('at')}" if failure else ""
        return NextAction(
            "failed",
            f"{where} stopped{said} - remove the cause (the DAG run's log says it), then clear "
            "the failed task of that DAG run; each step finds its own work done and goes on",
        )
    if not held and _stale(r.updated_at, now):
        return NextAction(
            "failed",
            f"{where} has no run working on it: clear its DAG run's failed task, or trigger "
            "the expansion DAG again with the same targets - it resumes from this status",
        )
    blocked = _barrier_blocked(r, status)
    if blocked is not None:
        return blocked
    run = f" (run {lease.holder})" if held and lease is not None else ""
    return NextAction(
        "waiting",
        f"{where} is under way{run}: watch its DAG run or the job page - it waits on "
        f"{waiting_on(r, status, now)}",
    )


def _barrier_blocked(r: ExpansionRecord, status: JobStatus) -> NextAction | None:
    """The current expansion's barrier, behind on some old partition (lag as last read)."""
    if r.status != S.BARRIER_SNAPSHOT or status.barrier_of != r.expansion_id:
        return None
    lag = status.barrier_lag or {}
    behind = sorted(
        ((n, t, p) for t, ps in lag.items() for p, n in ps.items() if n > 0), reverse=True
    )
    if not behind:
        return None
    total = sum(n for n, _, _ in behind)
    if len(behind) == 1:
        where = f"partition {behind[0][1]} {behind[0][2]}"
    else:
        more = f" and {len(behind) - 3} more" if len(behind) > 3 else ""
        where = "partitions " + ", ".join(f"{t} {p} ({n})" for n, t, p in behind[:3]) + more
    return NextAction(
        "barrier-blocked",
        f"barrier of expansion {r.expansion_id} blocked by lag {total} on {where}: the job has "
        "not committed up to the barrier offset there - check that it runs and reads it (the "
        "barrier step waits until it has)",
    )


def waiting_on(r: ExpansionRecord, status: JobStatus, now: datetime) -> str:
    """What an expansion under way waits for now, in words that follow its restart."""
    strategy = strategy_of(r)
    new = r.target_version
    if r.status == S.PLANNED:
        return "the expand step growing the topics"
    if r.status == S.EXPANDED:
        grace = r.results.get("grace")
        ends = grace.get("ends_at") if isinstance(grace, Mapping) else None
        left = _left_s(ends, now)
        when = f" ({left:.0f} s left)" if left is not None else ""
        return f"the producer refresh grace{when}, then the barrier snapshot"
    if r.status == S.BARRIER_SNAPSHOT:
        if strategy is not None and not strategy.waits_for_drain:
            return f"the barrier step ({strategy.mode}: the job gates the new partitions itself)"
        if status.barrier_of == r.expansion_id and status.barrier_lag is not None:
            return "the barrier step's next poll (every old partition is committed up to it)"
        return "the job committing up to the barrier offset on every old partition"
    warming = [
        p
        for p in status.processors
        if p.job_model_version == new and p.state == "starting" and p.alive(now)
    ]
    if r.status == S.BARRIER_PASSED and warming:
        return f"the standby of v{new} warming up, then the stop of v{r.base_version}"
    if r.status == S.BARRIER_PASSED:
        if strategy is None or strategy.stops_job:
            return f"the stop of v{r.base_version}: its processors stop at their next batch"
        return f"job model v{new} being written ({strategy.mode}: nothing stops)"
    if r.status == S.JOB_STOPPED:
        return f"job model v{new} being written"
    if r.status == S.JOB_MODEL_WRITTEN and (strategy is None or strategy.submits_job):
        return f"the submit of v{new}"
    return f"a processor running v{new} (the ack step)"


def _left_s(iso: Any, now: datetime) -> float | None:
    try:
        return max((parse_iso(str(iso)) - now).total_seconds(), 0.0) if iso else None
    except ValueError:
        return None


def _stale(iso: str, now: datetime) -> bool:
    try:
        return (now - parse_iso(iso)).total_seconds() > STALE_AFTER_S
    except ValueError:
        return False


__all__ = ["NextAction", "current_expansion", "current_step", "next_actions", "waiting_on"]
