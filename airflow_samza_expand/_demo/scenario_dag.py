"""The scenario's expansions by the DAG (`Scenario.expand`): build the expansion DAG for the
scenario's job, run it once (or interrupted after a task, then again whole, as an operator clears
a failed task), follow the job the DAG restarted, and measure the outcome (downtime, drain).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from airflow_samza_expand._demo.jobs import wait_for
from airflow_samza_expand._demo.latency import in_place_downtime
from airflow_samza_expand._demo.probe import Probe, drain_s, seconds_between
from airflow_samza_expand._demo.scenario_config import MID_BARRIER, ExpansionOutcome, dag_settings


class DagRuns:
    """The DAG side of `_demo.scenario.Scenario` (module docstring); the scenario holds the
    job, its store and topics, and the callables that run a DAG and read its outcome."""

    cfg: Any
    config: dict[str, str]
    job_name: str
    topic: str
    log_dir: str
    store: Any
    job: Any
    outcomes: list[ExpansionOutcome]
    interrupted_states: dict[str, dict[str, str]]
    run_dag: Callable[..., Any]
    task_states: Callable[[Any], dict[str, str]]
    xcom: Callable[..., Any]
    log: Callable[[str], None]
    args: Callable[..., list[str]]

    def build_dag(self, dag_id: str) -> Any:
        from airflow_samza_expand.dags import build_expansion_dag

        writer: dict[str, Any] = {}
        if self.cfg.naive:
            from airflow_samza_expand._demo.naive import NaiveWriteJobModelOperator

            writer = {"write_job_model_operator": NaiveWriteJobModelOperator}
        job = {"name": self.job_name, "topics": [self.topic], "run_mode": self.cfg.run_mode,
               "application_args": self.args()}  # fmt: skip
        return build_expansion_dag(dag_id, dag_settings(self.cfg, job, self.log_dir, writer))

    def expand(
        self,
        *,
        stop_after: str | Sequence[str] = (),
        on_task: Callable[[str, str], None] | None = None,
    ) -> ExpansionOutcome:
        """One expansion x2 by the DAG. ``stop_after``: first run the DAG only up to that task
        (or ``"mid-barrier"``: with a barrier that gives up at once), then rerun it whole; a
        sequence of tasks: the run cleared and interrupted again after each in turn."""
        from airflow_samza_expand._protocol.records import expansion_id_for

        before = self.store.latest_job_model().partition_counts()[self.topic]
        after = before * 2
        dag_id = f"samza_expand_{self.job_name.replace('-', '_')}_{before}_{after}"
        expansion_id = expansion_id_for(self.job_name, {self.topic: before}, {self.topic: after})
        probe = Probe(self.config, self.job_name, self.topic, expansion_id)
        probe.start()
        started = time.monotonic()
        try:
            # One DAG run: an interrupted run is cleared and run again (the same run id, so the
            # same expansion-lease holder), as an operator clears a failed task.
            when = datetime.now(UTC)
            for point in [stop_after] if isinstance(stop_after, str) else stop_after:
                self._interrupted_run(dag_id, point, when)
            dag = self.build_dag(dag_id)
            if on_task is not None:
                _attach_progress(dag, on_task)
            run = self.run_dag(dag, logical_date=when, run_after=when)
            states = self.task_states(run)
            summary = self.xcom(run, "report")
            restart_mode = ((summary or {}).get("restart") or {}).get("mode")
            submit = self.xcom(run, "submit")
            self._follow_restarted_job(self._launched(run, submit))
            # Let the probe see the restarted job's first commit (in place, in-app: the running
            # application takes vN+1 itself, nothing stops - protocol.restart)
            in_place = _launches_nothing(restart_mode)
            if self.cfg.run_mode == "continuous" and str(run.state) == "success" and not in_place:
                wait_for("the first committed batch after the restart",
                         lambda: probe.first_commit_at, timeout_s=120)  # fmt: skip
        finally:
            probe.close()
        t_expand = summary and summary.get("seconds_per_step")
        outcome = ExpansionOutcome(
            factor=2,
            counts=(before, after),
            state=str(run.state),
            summary=summary,
            tasks=states,
            probe={
                "downtime_s": seconds_between(probe.stopped_at, probe.first_commit_at),
                "barrier_reached_at": probe.barrier_reached_at,
            },
            wall_s=time.monotonic() - started,
            standby_took_over=standby_took_over(states, submit, restart_mode),
            restart=restart_mode,
        )
        if in_place and self.cfg.run_mode == "continuous" and outcome.state == "success":
            outcome.probe["downtime_s"] = in_place_downtime(self, expansion_id)
        if t_expand is not None and summary is not None:
            outcome.probe["drain_s"] = drain_s(summary, probe.barrier_reached_at, self.store,
                                               expansion_id)  # fmt: skip
        self.outcomes.append(outcome)
        return outcome

    def _launched(self, run: Any, submit: Any) -> Any:
        """The restarted job's launch: the submit step's, or (a handover) the vN+1 standby's."""
        if isinstance(submit, dict) and "pgid" in submit:
            return submit
        standby = self.xcom(run, "submit_standby")
        launches = (standby or {}).get("launches") if isinstance(standby, dict) else None
        return launches[0] if launches else submit

    def _follow_restarted_job(self, submit: Any) -> None:
        """The job is now the one the DAG's submit step launched (a detached launch names its
        process group): later pauses and the final stop reach it, not the stopped vN."""
        if self.job is not None and isinstance(submit, dict) and "pgid" in submit:
            self.job.handle = dict(submit)

    def _interrupted_run(self, dag_id: str, stop_after: str, when: datetime) -> None:
        dag = self.build_dag(dag_id)
        frozen = None
        if stop_after == MID_BARRIER:
            dag.task_dict["barrier"].barrier_timeout_s = 0.0
            subset = dag.partial_subset(task_ids=["barrier"], include_upstream=True)
            # The running job is paused (SIGSTOP) while the producer writes through the grace,
            # so its commits stay below the snapshot and the barrier gives up: always "failed".
            if self.job is not None and self.job.handle and self.cfg.run_mode == "continuous":
                frozen = int(self.job.handle["pgid"])
        else:
            subset = dag.partial_subset(task_ids=[stop_after], include_upstream=True)
        if frozen is not None:
            os.killpg(frozen, signal.SIGSTOP)
        try:
            run = self.run_dag(subset, logical_date=when, run_after=when)
        finally:
            if frozen is not None:
                os.killpg(frozen, signal.SIGCONT)
        states = self.interrupted_states[stop_after] = self.task_states(run)
        self._follow_restarted_job(self._launched(run, self.xcom(run, "submit")))
        self.log(f"interrupted run (stopped after {stop_after}): {states}")


def standby_took_over(states: dict[str, str], submit: Any, mode: str | None) -> bool:
    """The vN+1 standby took over: the restart was a handover to a standby (its strategy
    launches one), the standby step succeeded and the submit step found vN+1 running, so it
    launched nothing. An in-place or in-app restart launches no standby: its processor on
    vN+1, which the submit step may well find running already, is the same application."""
    strategy = _strategy_of(mode)
    return bool(
        strategy is not None
        and strategy.launches_standby
        and states.get("submit_standby") == "success"
        and isinstance(submit, dict)
        and submit.get("already_running")
    )


def _launches_nothing(mode: str | None) -> bool:
    """The restart ``mode`` stops and launches nothing (in place, in-app)."""
    strategy = _strategy_of(mode)
    return strategy is not None and strategy.launches_nothing


def _strategy_of(mode: str | None) -> Any:
    """The registered restart strategy named ``mode``; None for none or an unknown name."""
    from airflow_samza_expand._protocol.restart import STRATEGIES

    return STRATEGIES.get(mode) if mode else None


def _attach_progress(dag: Any, on_task: Callable[[str, str], None]) -> None:
    """Call ``on_task(task_id, event)`` when each task starts / succeeds / fails / skips."""
    for task in dag.tasks:
        tid = task.task_id
        task.on_execute_callback = [lambda ctx, t=tid: on_task(t, "start")]
        task.on_success_callback = [lambda ctx, t=tid: on_task(t, "success")]
        task.on_failure_callback = [lambda ctx, t=tid: on_task(t, "failed")]
        task.on_skipped_callback = [lambda ctx, t=tid: on_task(t, "skipped")]


__all__ = ["DagRuns"]
