"""The fault matrix's in-app cases (`fault_matrix.py --cases '*/in-app/*'`): the job is the
runtime's example user job (``examples/user_job.py``) on Spark's own Kafka source, handing
``job.run`` the function that starts its query, so the factory DAG's default restart (``auto``)
picks ``in-app``: the running application restarts its query on job model v2 once the barrier
passed, and Airflow launches nothing. The job runs under `_testing.supervisor` (on failure,
1 s back-off), which starts a driver that dies again, as a cluster manager does.

* ``kill/in-app/<step>``, ``kill/in-app/each-step``, ``lease/in-app/takeover``: the fault
  matrix's kill and lease cases on this job;
* ``driver/in-app/<moment>``: the user's driver (the supervisor's attempt: spark-submit, its
  JVM and Python) SIGKILLed during the barrier's drain (``barrier-drain``), right after job
  model v2 is written (``after-write``), while its query restarts on v2 (``query-restart``:
  the runtime logged the switch and has not restarted yet), right after it heartbeats
  ``running`` on v2 (``after-running``); the supervisor starts it again;
* ``broker/in-app/query-restart``: Apache Kafka restarted while the query restarts.

Each passes as the matrix's cases do (the run green, the record completed, the topic grown
once, job models [1, 2], exact, per-key order, no count reset) and: the plan chose ``in-app``,
nothing was launched by Airflow (no spark-submit log of the DAG's, no stop record before the
end), at most one processor processing at any moment (running, live, its driver alive -
sampled all along), the driver restarted exactly as often as the case killed it.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any

from fault_matrix import Case, Context, Job, Outcome, job_committed, wait_until

ROOT = Path(__file__).resolve().parents[1]
USER_JOB = str(ROOT / "airflow_samza_expand" / "examples" / "user_job.py")
SWITCHING = re.compile(r"switch in app: job model v(\d+) is written")
RESTARTED = re.compile(r"restarted its query on job model v(\d+)")
DRIVER_MOMENTS = ("barrier-drain", "after-write", "query-restart", "after-running")


class InAppJob(Job):
    """`fault_matrix.Job` with the example user job on Spark's own source, supervised."""

    def __init__(self, ctx: Context, case: Case, *, overrides: dict[str, Any] | None = None,
                 policy: str = "on-failure") -> None:  # fmt: skip
        super().__init__(ctx, case, overrides=overrides, application=USER_JOB,
                         app_args=("--source", "kafka"))  # fmt: skip
        self.policy = policy
        self.supervised: Any = None
        self.kills = 0  # drivers the case killed (each brought back by the supervisor)
        self.max_processing = 0
        self._sampling = threading.Event()
        self._sampler: threading.Thread | None = None

    def start(self) -> InAppJob:
        from fault_matrix import serialize

        from airflow_samza_expand._demo.jobs import running_processors, spark_env, wait_for
        from airflow_samza_expand._testing.supervisor import Supervised

        serialize(self.spec)
        self.s.setup()  # topics, job model v1, the job's command (s.job: never launched)
        self.s.start_producer()
        self.supervised = Supervised.start(self.s.job.command(), self.work / "supervisor",
                                           policy=self.policy, backoff_s=1.0,
                                           env=spark_env())  # fmt: skip
        wait_for("the user job to run job model v1", lambda: running_processors(self.s.store, 1),
                 timeout_s=300, log=self.s.log)  # fmt: skip
        wait_for("its first committed batch", lambda: job_committed(self) > 0, timeout_s=300)
        self._sampler = threading.Thread(target=self._sample, name="processing", daemon=True)
        self._sampler.start()
        return self

    # -- the driver ------------------------------------------------------------------------------

    def attempt_log(self) -> str:
        path = self.work / "supervisor" / f"attempt-{self.supervised.attempts()}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def kill_driver(self, why: str) -> None:
        """SIGKILL the running driver (not the supervisor); wait until the next one started."""
        n = self.supervised.attempts()
        pid = self.supervised.kill_attempt()
        self.kills += 1
        self.ctx.log(f"  driver {pid} (attempt {n}) SIGKILLed {why}")
        self.supervised.wait_attempts(n + 1)

    def _sample(self) -> None:
        """At most one processor processing at any moment: running, live, its driver alive."""
        from airflow_samza_expand.core._liveness import statuses

        while not self._sampling.wait(0.2):
            try:
                records = self.s.store.processors()
            except Exception:  # noqa: BLE001 - Kafka away for a moment: the next sample
                continue
            live = [
                p
                for p in statuses(records).values()
                if p.state == "running" and p.alive() and driver_alive(p.processor_id)
            ]
            self.max_processing = max(self.max_processing, len(live))

    # -- the outcome -----------------------------------------------------------------------------

    def outcome(self, result: dict[str, Any], strategy: str, *, max_extra: int = 1) -> Outcome:
        """`Job.outcome` (a processor more per killed driver) and the in-app checks."""
        record = self.record()
        choice = ((record.results.get("plan") or {}).get("restart") or {}) if record else {}
        launched = sorted(p.name for p in Path(self.s.log_dir).rglob("spark-submit-*.log"))
        stopped = self.s.store.stop_request()
        self._sampling.set()
        exits = self.supervised.exits()
        out = super().outcome(result, strategy, max_extra=max_extra + self.kills)
        in_app = choice.get("mode") == "in-app"
        nothing_launched = not launched and stopped is None
        one = self.max_processing <= 1
        restarts = [e.code for e in exits] == [-9] * self.kills
        out.notes.append(f"restart={choice.get('mode')} launched={launched} stop={stopped} "
                         f"max_processing={self.max_processing} driver_exits="
                         f"{[e.code for e in exits]} kills={self.kills}")  # fmt: skip
        out.completed_once = out.completed_once and in_app and nothing_launched and one
        out.completed_once = out.completed_once and restarts
        return out

    def close(self) -> None:
        self._sampling.set()
        try:
            super().close()
        finally:
            if self.supervised is not None:
                self.supervised.stop()


def driver_alive(processor_id: str) -> bool:
    """The runtime's processor id is ``<host>-<driver pid>`` (this machine's drivers)."""
    tail = processor_id.rsplit("-", 1)[-1]
    return not tail.isdigit() or os.path.exists(f"/proc/{tail}")


def driver_case(ctx: Context, case: Case) -> Outcome:
    """The user's driver SIGKILLed at ``case.step`` (`DRIVER_MOMENTS`); the supervisor starts
    it again and the run goes on (the DAG's ack waits for the new driver on v2)."""
    job = InAppJob(ctx, case).start()
    try:
        run = job.run()
        if case.step == "barrier-drain":
            job.wait_step(run, "barrier-drain")
        elif case.step == "after-write":
            # polled tightly: the driver looks for a newer job model every 0.5 s
            wait_until(lambda: job.s.store.latest_job_model().version == 2, "job model v2",
                       interval_s=0.01)  # fmt: skip
        elif case.step == "query-restart":
            wait_until(lambda: SWITCHING.search(job.attempt_log()), "the switch in app")
        else:
            from airflow_samza_expand._demo.jobs import running_processors

            wait_until(lambda: running_processors(job.s.store, 2), "a driver running on v2")
        text = job.attempt_log()
        job.kill_driver(f"at {case.step} (switching: {bool(SWITCHING.search(text))}, "
                        f"restarted: {bool(RESTARTED.search(text))})")  # fmt: skip
        return job.outcome(run.result(), case.strategy, max_extra=0)
    finally:
        job.close()


def broker_query_restart_case(ctx: Context, case: Case) -> Outcome:
    """Apache Kafka restarted on its data once the driver logged its switch in app."""
    job = InAppJob(ctx, case, overrides={"retries": 3}).start()
    try:
        run = job.run()
        wait_until(lambda: SWITCHING.search(job.attempt_log()), "the switch in app")
        ctx.kafka.restart()
        return job.outcome(run.result(), case.strategy, max_extra=0)
    finally:
        job.close()


def in_app_cases() -> list[Case]:
    """The in-app cases beyond the kills of each step (`fault_matrix.all_cases` has those)."""
    from fault_matrix import each_step_case, lease_case

    cases = [
        Case("kill/in-app/each-step", "sigkill-task", "each-step", "in-app", each_step_case),
        Case("lease/in-app/takeover", "lease-takeover", "barrier", "in-app", lease_case),
        Case("broker/in-app/query-restart", "broker-restart", "query-restart", "in-app",
             broker_query_restart_case),
    ]  # fmt: skip
    cases += [Case(f"driver/in-app/{moment}", "sigkill-driver", moment, "in-app", driver_case)
              for moment in DRIVER_MOMENTS]  # fmt: skip
    return cases
