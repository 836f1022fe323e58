"""JobsReportOperator: the outcome of each job of a multi-job expansion run, in one place."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

STEP_ORDER = (
    "plan",
    "expand",
    "submit_standby",
    "barrier_snapshot",
    "drain",
    "barrier",
    "stop_job",
    "write_job_model",
    "submit",
    "hot_standby",
    "ack",
    "report",
)
BAD_STATES = frozenset({"failed", "upstream_failed"})


def job_outcome(report: Mapping[str, Any] | None, states: Mapping[str, str]) -> dict[str, Any]:
    """``{outcome, failed_step, states, ...}`` of one job from its report XCom and task states
    (task ids without the group prefix)."""
    bad = {
        t.split("_", 1)[0] if t.startswith("expand_") else t
        for t, v in states.items()
        if v in BAD_STATES
    }
    failed = next((s for s in STEP_ORDER if s in bad), None)
    if report:
        outcome = "dry-run" if report.get("dry_run") else "completed"
    elif failed is not None:
        outcome = "failed"
    elif states and all(v == "skipped" for k, v in states.items() if k != "report"):
        outcome = "skipped"
    else:
        outcome = "unknown"
    lines = {
        "outcome": outcome,
        "failed_step": failed,
        "states": dict(states),
    }
    if report:
        lines |= {
            "expansion_id": report.get("expansion_id"),
            "job_model_version": report.get("job_model_version"),
            "counts_after": report.get("counts_after"),
            "downtime_s": report.get("downtime_s"),
        }
    return lines


class JobsReportOperator(BaseOperator):
    """After every job's chain (``trigger_rule="all_done"``): log one line per job (completed,
    dry run, failed at which step, skipped) and return them (XCom ``{"jobs": {job: ...}}``).
    One job failing does not undo the others; this task then fails so the run shows red."""

    ui_color = "#e0e0e0"

    def __init__(self, *, groups: Mapping[str, str], **kwargs: Any) -> None:
        kwargs.setdefault("trigger_rule", "all_done")
        super().__init__(**kwargs)
        self.groups = dict(groups)  # job -> task id prefix of its chain ("<group>.")

    def _states(self, context: Any) -> dict[str, str]:
        ti = context["ti"]
        with contextlib.suppress(Exception):  # an executor without the task-state API
            found = ti.get_task_states(dag_id=ti.dag_id, run_ids=[ti.run_id])
            return dict(found.get(ti.run_id) or {})
        return {}

    def execute(self, context: Any) -> dict[str, Any]:
        ti = context["ti"]
        states = self._states(context)
        jobs: dict[str, Any] = {}
        for job, prefix in self.groups.items():
            report = ti.xcom_pull(task_ids=f"{prefix}report")
            own = {k[len(prefix) :]: v for k, v in states.items() if k.startswith(prefix)}
            jobs[job] = job_outcome(report, own)
        return self.conclude(ti, jobs)

    def conclude(self, ti: Any, jobs: dict[str, Any]) -> dict[str, Any]:
        """Log each job's outcome; fail (after pushing the XCom) when one job failed."""
        for job, row in jobs.items():
            where = f" at {row['failed_step']}" if row["failed_step"] else ""
            self.log.info("Job %s: %s%s", job, row["outcome"], where)
        bad: Sequence[str] = [j for j, row in jobs.items() if row["outcome"] == "failed"]
        if bad:
            ti.xcom_push(key="return_value", value={"jobs": jobs})
            raise AirflowFailException(
                f"job(s) {', '.join(bad)} did not complete their expansion (the others are not "
                "rolled back): see their tasks' logs, fix and clear the failed task"
            )
        return {"jobs": jobs}
