"""The fault matrix's broker outages (`fault_matrix.py --cases '*outage*'`): Apache Kafka
stopped for 30 s or 3 minutes, then started on its data directory, while the job runs
(``running``: no expansion under way, then an expansion) or during an expansion (``expansion``:
once the barrier's grace began; the DAG's tasks retry). The shipped job in place and the
supervised example user job in-app (`_fault_matrix_inapp`). The job's lease TTL is 60 s: the
short outage stays within it, the long one outlasts it (the job fenced, then taking its lease
again by itself).

The cluster matrix runs the same cases with every node of its three-node cluster down at once
(``cluster/outage/...``, `_fault_matrix_cluster`).

Each passes as the matrix's cases do (the expansion completed once, exact, per-key order) and
the job rode the outage out: the shipped job's driver is the one launched at the start; the
in-app driver never exited (the supervisor started none again).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from fault_matrix import Case, Context, Job, Outcome, job_committed, job_for, wait_until

DURATIONS_S = {"30s": 30, "3min": 180}
WHEN = ("running", "expansion")
STRATEGIES = ("in-place", "in-app")
# a 3-minute outage fails a task's Kafka calls for longer than one try: more tries
OVERRIDES = {"retries": 6}


def outage(ctx: Context, seconds: float) -> None:
    """Apache Kafka down for ``seconds`` (the outage's length), then started on its data: the
    broker, or on the cluster (`_fault_matrix_cluster`) every node at once."""
    ctx.log(f"  Kafka down for {seconds:.0f} s")
    began = time.monotonic()
    ctx.kafka.stop()
    time.sleep(seconds)
    ctx.kafka.start()
    ctx.log(f"  Kafka back, {time.monotonic() - began:.0f} s after it went down")


def outage_case(ctx: Context, case: Case) -> Outcome:
    when, length = case.step.split("-", 1)
    job = job_for(ctx, case, overrides=OVERRIDES).start()
    try:
        if when == "running":
            before = job_committed(job)
            outage(ctx, DURATIONS_S[length])
            wait_until(lambda: job_committed(job) > before, "the job to commit after the outage",
                       timeout_s=300)  # fmt: skip
            run = job.run()
        else:
            run = job.run()
            job.wait_step(run, "barrier-grace")
            outage(ctx, DURATIONS_S[length])
        same = same_driver(job)
        out = job.outcome(run.result(), case.strategy, max_extra=0)
        out.notes.append(f"same_driver={same}")
        out.completed_once = out.completed_once and same
        return out
    finally:
        job.close()


def same_driver(job: Job) -> bool:
    """The job launched at the start still runs (in-app: never launched so; the outcome
    checks the supervisor's exits)."""
    from airflow_samza_expand._protocol.job import launch as detached

    handle = job.s.job.handle
    return handle is None or detached.is_running(handle)


def outage_cases(
    prefix: str = "outage", run: Callable[[Context, Case], Outcome] = outage_case
) -> list[Case]:
    """The outage cases, named ``<prefix>/<strategy>/<when>-<length>`` and run by ``run`` (the
    cluster matrix's: every node down, `_fault_matrix_cluster`)."""
    return [
        Case(f"{prefix}/{strategy}/{when}-{length}", "outage", f"{when}-{length}", strategy, run)
        for strategy in STRATEGIES
        for when in WHEN
        for length in DURATIONS_S
    ]  # fmt: skip
