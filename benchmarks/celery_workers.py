"""Celery workers: the factory DAG on Airflow's CeleryExecutor with two workers that share
nothing but the metadata database (through the api-server), the Celery broker and Kafka - each
its own temp directory, HOME and launch host name (`_testing.celery_workers`) - with the REAL
jobs under live keyed traffic (`fault_matrix.Job`: Spark local[2], one Apache Kafka), and the
worker of the launching or waiting step SIGKILLed mid-step so that its retry runs on the other
worker.

Cases (``--list``):

* ``cold``: the shipped job restarted cold; the submit step's worker killed once its launch is
  detached (its log's ``detached: pid`` line; the launch lives on, as a cluster manager's job
  does) and while its start-up check runs; the retry on the other worker finds the launch in
  the expansion record and waits for it instead of launching again.
* ``warm``: the same for the standby step of a warm restart; the submit step launches nothing.
* ``in-app``: the example user job on the runtime, supervised as a cluster manager runs it
  (`_fault_matrix_inapp.InAppJob`); the job is down when the run starts (its supervisor
  stopped), the plan waits for it in the only worker up; a second worker starts, the first is
  killed, the plan's retry waits on there; the job is started again and restarts its own
  query on job model v2 - Airflow launches nothing.

Each case passes when the run ends success (retries allowed), the launching/waiting step ran
twice (its retry on the other worker), the record completed once, job models [1, 2], the topic
grown once, every record counted exactly once and in per-key order (`Job.outcome`), at most
one processor processing at every moment (sampled all along), spark-submit spawned once by the
workers (cold, warm: the record's launch is the first try's, on its host) or never (in-app).

Starts Spark (one job per case): run it alone, or under ``flock`` one case at a time. One line
per case ``case=.. retried_on_other=.. completed_once=.. exact=.. in_order=.. max_processing=..
spawns=.. ok=..``; last line ``celery_cases_passed=<n>/<total>``.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
CASES = {"cold": "submit", "warm": "submit_standby", "in-app": "plan"}  # the task killed
SPAWNS = {"cold": 1, "warm": 1, "in-app": 0}  # spark-submit spawns by the workers
RETRIES = {"retries": 2}
# the start-up check outlasts the kill (the worker dies while the launching step runs); the
# launch log in the launching worker's own temp directory, as on a machine of its own
LAUNCHING = {**RETRIES, "spark": {"log_dir": None, "submit_kwargs": {"startup_check_s": 120.0}}}
# in-app named (``auto`` picks cold for a job that is down) and the DAG naming no application
# (it never launches the job; the job's arguments given plain, not the shipped job's): the plan
# waits for a job that is down, in its worker (``[operators] default_deferrable`` is off)
WAITING = {
    **RETRIES,
    "restart": {"restart": "in-app", "job_down_timeout_s": 600.0},
    "spark": {"application": None, "application_on_runtime": False},
}
# what a launching step's retry decided, by its log: no second launch either way
RETRY_DECISIONS = {
    "waited-for-the-launch": ("not launching job", "not launching a standby"),
    "found-it-running": ("already runs job model", "launching no standby"),
}


def sampled_job() -> type:
    """`fault_matrix.Job` (the shipped job) with `InAppJob`'s sampler of the processors
    processing at once (running, live, driver alive), from its start to its outcome."""
    from _fault_matrix_inapp import InAppJob
    from fault_matrix import Job

    class SampledJob(Job):
        _sample = InAppJob._sample

        def start(self) -> SampledJob:
            self.max_processing, self._sampling = 0, threading.Event()
            super().start()
            threading.Thread(target=self._sample, name="processing", daemon=True).start()
            return self

        def close(self) -> None:
            self._sampling.set()
            super().close()

    return SampledJob


class Celery:
    """The services and both workers (one set for every case), ``spark-submit`` on their PATH
    noting each spawn (`spawn_noting_submit`) before it runs the real one."""

    def __init__(self, work: Path) -> None:
        from airflow_samza_expand._testing.airflow_services import AirflowServices
        from airflow_samza_expand._testing.celery_workers import (
            CeleryWorkers,
            celery_env,
            spawn_noting_submit,
        )

        self.root = work / "celery"
        real = shutil.which("spark-submit")
        bin_dir = spawn_noting_submit(self.root, f'exec {real} "$@"')
        home = self.root / "airflow"
        env = {**celery_env(home), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
               "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "False"}  # fmt: skip
        self.af = AirflowServices.start(home, env=env)
        self.workers = CeleryWorkers(self.af, self.root)

    def add_dag(self, spec: dict[str, Any]) -> str:
        """The case's DAG file (`fault_matrix.build_dag`), once the dag-processor has it."""
        from fault_matrix import TRIGGERER_DAG

        dag_id = spec["dag_id"]
        text = TRIGGERER_DAG.format(paths=[str(ROOT), str(HERE.parent)], spec=json.dumps(spec))
        (self.af.dags_folder / f"{dag_id}.py").write_text(text)
        self.af.wait_dag(dag_id)
        return dag_id


def launch_case(ctx: Any, celery: Celery, case: Any) -> tuple[Any, dict[str, Any]]:
    """cold, warm: the launching step's worker killed once its launch is detached."""
    from airflow_samza_expand._testing.celery_workers import spawns

    af, workers, task = celery.af, celery.workers, CASES[case.name]
    workers.up()
    job = sampled_job()(ctx, case, overrides=LAUNCHING).start()
    try:
        dag_id = celery.add_dag(job.spec)
        run_id = af.trigger(dag_id)

        def launched() -> dict | None:
            record = job.record()
            facts = (record.results.get("launch") if record else None) or {}
            return facts if facts and spawns(celery.root, job.s.job_name) else None

        first = af.wait(launched, f"the {task} step to launch", 600)["host"]
        other = workers.kill_on_retry(dag_id, run_id, task, first)
        ctx.log(f"  [{case.name}] {task} on {first} killed mid-step; retry on {other}")
        return finish(job, celery, case, dag_id, run_id, first)
    finally:
        job.close()


def in_app_case(ctx: Any, celery: Celery, case: Any) -> tuple[Any, dict[str, Any]]:
    """in-app: the plan waiting for the job (down) in its worker; that worker killed."""
    from _fault_matrix_inapp import InAppJob

    from airflow_samza_expand._demo.jobs import spark_env
    from airflow_samza_expand._testing.supervisor import Supervised
    from airflow_samza_expand.core._liveness import statuses

    af, workers = celery.af, celery.workers
    job = InAppJob(ctx, case, overrides=WAITING)  # it samples the processors itself
    job.spec["overrides"]["job"] = {"application_args": list(job.s.args())}
    job.start()
    try:
        job.supervised.stop()  # the job down: its driver and supervisor gone
        store = job.s.store
        af.wait(lambda: not any(p.alive() for p in statuses(store.processors()).values()),
                "the job's heartbeat to expire", 120)  # fmt: skip
        dag_id = celery.add_dag(job.spec)
        first = workers.only_one()
        run_id = af.trigger(dag_id)
        af.wait(lambda: workers.said(dag_id, "plan", "waiting up to", attempt=1),
                "the plan to wait for the job in its worker", 300)  # fmt: skip
        other = workers.kill_on_retry(dag_id, run_id, "plan", first)
        af.wait(lambda: workers.said(dag_id, "plan", "waiting up to"),
                "the retry to wait for the job", 180)  # fmt: skip
        ctx.log(f"  [{case.name}] plan on {first} killed mid-wait; retry waits on {other}")
        job.supervised = Supervised.start(job.s.job.command(), job.work / "supervisor-again",
                                          policy=job.policy, backoff_s=1.0,
                                          env=spark_env())  # fmt: skip
        return finish(job, celery, case, dag_id, run_id, None)
    finally:
        job.close()


def finish(job: Any, celery: Celery, case: Any, dag_id: str, run_id: str,
           first: str | None) -> tuple[Any, dict[str, Any]]:  # fmt: skip
    """The run's end; `Job.outcome` (exact, in order, completed once) and this benchmark's
    checks: the step retried, one processor at a time, the spawns, the record's launch."""
    from airflow_samza_expand._testing.celery_workers import spawns

    state, tis = celery.workers.ended(dag_id, run_id, timeout_s=900)
    record = job.record()
    task = CASES[case.name]
    result = {"state": state, "tasks": {t: ti["state"] for t, ti in tis.items()}}
    out = job.outcome(result, case.strategy, max_extra=1 if first is None else 0)
    spawned = spawns(celery.root, job.s.job_name)
    launch = (record.results.get("launch") if record else None) or {}
    decision = retry_decision(celery, dag_id, task) if first else "waited-for-the-job"
    checks = {
        "retried_on_other": tis[task]["try_number"] == 2,
        "retry": decision,
        "max_processing": job.max_processing,
        "spawns": len(spawned),
    }
    ok = checks["retried_on_other"] and job.max_processing <= 1
    ok = ok and len(spawned) == SPAWNS[case.name]
    if case.name == "warm":
        ok = ok and all("--standby" in argv for argv in spawned)
    if first is not None:  # the record's launch: the first try's, on its worker
        ok = ok and decision is not None
        ok = ok and (launch.get("host"), launch.get("attempt")) == (first, 1)
        out.notes.append(f"launch={ {k: launch.get(k) for k in ('host', 'step', 'attempt')} }")
    else:
        ok = ok and "launch" not in (record.results if record else {})
    out.completed_once = out.completed_once and ok
    return out, checks


def retry_decision(celery: Celery, dag_id: str, task: str) -> str | None:
    """What the launching step's retry decided (`RETRY_DECISIONS`), by its log; None: it
    launched (or said nothing known)."""
    for name, texts in RETRY_DECISIONS.items():
        if any(celery.workers.said(dag_id, task, text) for text in texts):
            return name
    return None


def run_case(ctx: Any, celery: Celery, case: Any) -> bool:
    started = time.monotonic()
    checks: dict[str, Any] = {}
    try:
        out, checks = case.run(ctx, celery, case)
    except Exception as exc:  # noqa: BLE001 - one case's failure is its line, not the end
        from fault_matrix import Outcome

        out = Outcome(notes=[f"error: {exc!r}"])
        ctx.log(traceback.format_exc())
    shown = " ".join(f"{k}={v}" for k, v in checks.items())
    ctx.log(f"case={case.name} {shown} completed_once={out.completed_once} exact={out.exact} "
            f"in_order={out.in_order} ok={out.ok} seconds={time.monotonic() - started:.0f}"
            + (f" notes={'; '.join(out.notes)}" if not out.ok else ""))  # fmt: skip
    return out.ok


def all_cases() -> list[Any]:
    from fault_matrix import Case

    run = {"cold": launch_case, "warm": launch_case, "in-app": in_app_case}
    return [Case(name, "sigkill-worker", CASES[name], name, run[name]) for name in CASES]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=None, help="comma-separated globs over case names")
    parser.add_argument("--smoke", action="store_true", help="the one case cold (still minutes)")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--work-dir", help="keep logs here (default: a temporary directory)")
    args = parser.parse_args(argv)
    globs = (args.cases or ("cold" if args.smoke else "*")).split(",")
    cases = [c for c in all_cases() if any(fnmatch.fnmatch(c.name, g) for g in globs)]
    if args.list:
        print("\n".join(c.name for c in cases))
        return 0
    if not cases:
        print(f"no case matches {args.cases!r} - see --list", file=sys.stderr)
        return 2
    from fault_matrix import Context, prepare_airflow, start_kafka

    work = Path(args.work_dir or tempfile.mkdtemp(prefix="celery-workers-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work directory {work}", flush=True)
    kafka = start_kafka(work)
    passed = 0
    try:
        prepare_airflow(work, kafka.bootstrap)
        ctx = Context(kafka, work, log=lambda line: print(line, flush=True))
        started = time.monotonic()
        celery = Celery(work)
        try:
            celery.workers.up()
            print(f"services and workers up in {time.monotonic() - started:.0f} s", flush=True)
            for case in cases:
                passed += run_case(ctx, celery, case)
        finally:
            celery.af.stop()
    finally:
        kafka.close()
    print(f"celery_cases_passed={passed}/{len(cases)}", flush=True)
    return 0 if passed == len(cases) else 1


if __name__ == "__main__":
    sys.path[:0] = [str(ROOT), str(HERE.parent)]
    sys.exit(main())
