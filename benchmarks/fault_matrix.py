"""Fault matrix: faults in the middle of an expansion, on one Apache Kafka, under
live keyed traffic, with the REAL shipped job (Spark local[2]) and real Airflow task processes.

Every expansion case: a fresh job (its own topics, coordinator, checkpoint) runs on job model
v1 under a keyed producer; the expansion DAG (the factory's, with the case's restart strategy)
runs with ``dag.test()`` in a process of its own (``--run-dag``, as tests/airflow/dag_runner.py),
is hurt once the expansion record shows the case's step begun, and is then cleared (the same
logical date run again in a new process). The case passes when the expansion completed once
(one record, completed; topic grown once; job models [1, 2]; the job launched at most once more
than the strategy launches it), every produced record counted exactly once (exact) and in
per-key order (in_order) - `_demo.verify`.

Cases (``--list``):

* ``kill/<strategy>/<step>``: SIGKILL of the DAG run's process group (its task processes and
  its in-process triggerer) in the middle of <step>, then the run cleared. in-place: plan,
  expand, barrier-grace, barrier-drain, write, ack, report; warm: + standby, stop, submit; cold:
  + stop, submit. A step of milliseconds is held midway in the run's process once it began
  (`hold_step_midway`: fault injection, a kill from outside would land after it); each case
  checks from the record at the kill that the step had begun and not ended (``mid_step``).
* ``kill/in-place/each-step``: one expansion killed midway in each in-place step in turn (the
  clearing of each kill killed in the next step), until a clearing completes it.
* ``broker/...``: Apache Kafka stopped and started on its data directory during the barrier,
  during the handover (warm: once the stop began) or switch (in-place: once the write began),
  and between expansions with the job running; the DAG's tasks retry (retries=3).
* ``lease/takeover``: run A SIGKILLed holding the lease at the barrier; run B (another logical
  date) takes the expansion over once A's lease expired and finishes it; A cleared later ends
  skipped and writes nothing.
* ``processor/failover``, ``processor/zombie``: tests/spark/test_spark_processors.py's cases on
  this Apache Kafka (SIGKILL of the active with a standby; SIGSTOP past the TTL, SIGCONT).

* ``.../in-app/...`` (`_fault_matrix_inapp`): the example user job on Spark's own source run
  by `_testing.supervisor` as a cluster manager runs it; the kills of each step above, the
  driver SIGKILLed at four moments of its switch and brought back by the supervisor, the lease
  taken over, the broker restarted while the query restarts.
* ``outage/<strategy>/<when>-<length>`` (`_fault_matrix_outage`): Apache Kafka down 30 s or
  3 minutes while the job runs or during an expansion, in place and in-app.

* ``triggerer/barrier``, ``triggerer/ack``: the DAG run by real Airflow services
  (`_testing.airflow_services`: api-server, scheduler, dag-processor, triggerer; ``dag.test()``
  runs triggers in its own process); the triggerer SIGKILLed while the barrier (warm, in a
  20 s grace) or the ack (cold, during the restarted job's Spark start) is deferred and its
  trigger polls there, then a new triggerer started: the same trigger resumes (the task keeps
  try 1) and the run ends success.

Starts Spark: run it alone on the machine (a Spark start per case). One line per case:
``fault=.. step=.. strategy=.. completed_once=.. exact=.. in_order=.. ok=..``; last line
``fault_cases_passed=<n>/<total>``. ``--smoke`` runs one case (CI size; still minutes).
``--lock FILE`` flocks FILE around each case (a machine shared with other Spark users).
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
KILL_STEPS = {
    "in-place": ("plan", "expand", "barrier-grace", "barrier-drain", "write", "ack", "report"),
    "warm": (
        "plan",
        "expand",
        "standby",
        "barrier-grace",
        "barrier-drain",
        "stop",
        "write",
        "submit",
        "ack",
        "report",
    ),  # fmt: skip
    "cold": (
        "plan",
        "expand",
        "barrier-grace",
        "barrier-drain",
        "stop",
        "write",
        "submit",
        "ack",
        "report",
    ),  # fmt: skip
}
KILL_STEPS["in-app"] = KILL_STEPS["in-place"]  # the user job's query restarted in its driver
# --smoke: one kill of the default strategy (a Spark job, a DAG run killed and cleared)
SMOKE_CASE = "kill/in-place/plan"
# --cluster --smoke: the coordinator topic's leader killed during the write of job model v2
CLUSTER_SMOKE_CASE = "cluster/in-place/coordinator-write"
# processors the strategy itself runs over the expansion (v1 + launches of v2)
PROCESSORS = {"in-place": 1, "in-app": 1, "warm": 2, "cold": 2}
A_DATE = "2026-03-01T00:00:00+00:00"
B_DATE = "2026-03-02T00:00:00+00:00"
LEASE_TTL_S = 12.0
# faults a job must ride out holding its lease (a TTL longer than a broker restart or failover)
LONG_TTL_FAULTS = ("broker-restart", "cluster", "outage")
# a stuck case fails in minutes, not in the scenario's 10 (no retries unless the case says)
BOUNDED = {"retries": 0, "barrier": {"barrier_timeout_s": 180.0},
           "restart": {"stop_timeout_s": 120.0, "ack_timeout_s": 180.0}}  # fmt: skip


@dataclass
class Case:
    name: str
    fault: str
    step: str
    strategy: str
    run: Callable[[Context, Case], Outcome]


@dataclass
class Outcome:
    completed_once: bool = False
    exact: bool = False
    in_order: bool = False
    mid_step: bool | None = None  # kill cases: the step had begun and not ended at the kill
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.completed_once and self.exact and self.in_order and self.mid_step is not False


@dataclass
class Context:
    """What every case shares: the Apache Kafka, a work directory, a log function, and the
    real Airflow services of the triggerer cases (started on first use)."""

    kafka: Any
    work: Path
    log: Callable[[str], None] = print
    # the jobs' micro-batch cadence (None: the demo's 500 ms); CI's subset passes a slower one
    # (tests/e2e/conftest.py's E2E_TRIGGER): a batch costs driver CPU whatever it carries
    trigger: str | None = None
    _services: Any = None

    @property
    def bootstrap(self) -> str:
        return self.kafka.bootstrap

    def services(self) -> Any:
        if self._services is None:
            from airflow_samza_expand._testing.airflow_services import AirflowServices

            self._services = AirflowServices.start(self.work / "airflow-services")
        return self._services

    def close(self) -> None:
        if self._services is not None:
            self._services.stop()


# -- one DAG run in a process of its own ---------------------------------------------------------


def run_dag_main(spec_text: str) -> int:
    """``--run-dag SPEC``: build the case's DAG, wait for ``go``, ``dag.test()``, print JSON."""
    from datetime import datetime

    spec = json.loads(spec_text)
    dag = build_dag(spec)
    if spec.get("hold_at"):
        hold_step_midway(spec["hold_at"], spec["held"], spec.get("release"))
    Path(spec["ready"]).touch()
    while not os.path.exists(spec["go"]):
        time.sleep(0.02)
    when = datetime.fromisoformat(spec["logical_date"])
    run = dag.test(logical_date=when, run_after=when)
    from airflow.utils.session import create_session

    with create_session() as session:
        tasks = {ti.task_id: str(ti.state) for ti in run.get_task_instances(session=session)}
    print(json.dumps({"run_id": run.run_id, "state": str(run.state), "tasks": tasks}))
    return 0


# Steps a kill case holds in their middle (fault injection: most steps take milliseconds, too
# short for a kill from outside to land inside them): the step has begun - its start is in the
# record (plan: the job's lease is taken) - and waits there until the case kills the run.
HELD_STEPS = ("plan", "expand", "stop", "submit", "write", "ack", "report")
HOLD_S = 120.0


def hold_step_midway(step: str, held: str, release: str | None = None) -> None:
    """In the DAG run's process (its task processes are forked from it): once ``step`` began,
    touch ``held`` and wait ``HOLD_S`` (or until ``release`` exists: the step then goes on,
    as the cluster cases do after hurting a broker). plan: before its record is stored (lease
    held); the others: right after `_protocol.records.begin` wrote the step's start."""
    from airflow_samza_expand._protocol import records

    def hold() -> None:
        Path(held).touch()
        deadline = time.monotonic() + HOLD_S
        while time.monotonic() < deadline and not (release and os.path.exists(release)):
            time.sleep(0.05)

    if step == "plan":
        from airflow_samza_expand._protocol.steps.plan import step as plan_step

        store_new = plan_step._store_new

        def held_store_new(*args: Any, **kwargs: Any) -> Any:
            hold()
            return store_new(*args, **kwargs)

        plan_step._store_new = held_store_new
        return
    begin = records.begin

    def held_begin(store: Any, expansion_id: str, name: str, **kwargs: Any) -> Any:
        out = begin(store, expansion_id, name, **kwargs)
        if name == step and not Path(held).exists():
            hold()
        return out

    records.begin = held_begin


def mid_step(record: Any, step: str) -> bool:
    """The record at the kill shows ``step`` begun and not ended (plan: no record yet)."""
    if step == "plan":
        return record is None
    if record is None:
        return False
    if step == "barrier-grace":
        snapshot = record.steps.get("barrier_snapshot")
        return bool(snapshot) and not snapshot.ended_at
    if step == "barrier-drain":
        snapshot, barrier = record.steps.get("barrier_snapshot"), record.steps.get("barrier")
        return bool(snapshot and snapshot.ended_at) and not (barrier and barrier.ended_at)
    times = record.steps.get(step)
    return times is not None and not times.ended_at


def _merged(base: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``more``: a group's fields (``{group: {field: value}}``) merged field by
    field."""
    out = dict(base)
    for key, value in more.items():
        out[key] = {**out.get(key, {}), **value} if isinstance(value, dict) else value
    return out


def build_dag(spec: dict[str, Any]) -> Any:
    """The scenario's expansion DAG (demo.scenario.Scenario.build_dag) with the case's
    overrides (retries, lease TTL)."""
    from airflow_samza_expand._demo.scenario import Scenario, dag_settings
    from airflow_samza_expand.dags import build_expansion_dag

    cfg = scenario_config(spec["cfg"])
    s = Scenario(cfg, run_dag=None, task_states=None, xcom=None)  # type: ignore[arg-type]
    try:
        job = {"name": s.job_name, "topics": [s.topic], "run_mode": cfg.run_mode,
               "application_args": s.args()}  # fmt: skip
        settings = dag_settings(cfg, job, s.log_dir, spec.get("overrides", {}))
        return build_expansion_dag(spec["dag_id"], settings)
    finally:
        s.admin.close()


def scenario_config(doc: dict[str, Any]) -> Any:
    from airflow_samza_expand._demo.scenario import ScenarioConfig

    return ScenarioConfig(**{**doc, "work_dir": Path(doc["work_dir"]),
                             "application_args": tuple(doc["application_args"])})  # fmt: skip


def serialize(spec: dict[str, Any]) -> None:
    """Write the case's DAG to the metadata database (what the DAG processor does)."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.collection import update_dag_parsing_results_in_db
    from airflow.serialization.serialized_objects import LazyDeserializedDAG
    from airflow.utils.session import create_session

    dag = build_dag(spec)
    with create_session() as session:
        DagBundlesManager().sync_bundles_to_db(session=session)
        session.commit()
        update_dag_parsing_results_in_db(
            "dags-folder", None, [LazyDeserializedDAG.from_dag(dag)], {}, None, set(),
            session=session,
        )  # fmt: skip


class DagRun:
    """One whole DAG run in its own process group (a kill takes its task processes too; the
    job's detached launches run in sessions of their own and survive, as in production)."""

    def __init__(self, spec: dict[str, Any], logical_date: str, work: Path, *, hold: bool,
                 hold_at: str | None = None):  # fmt: skip
        self.go = work / f"go-{uuid.uuid4().hex[:8]}"
        self.log_path = Path(f"{self.go}.log")
        self.held = Path(f"{self.go}.held")  # touched once the step held midway began
        self.unhold = Path(f"{self.go}.release")  # touched to let the held step go on
        if not hold:
            self.go.touch()
        doc = {**spec, "logical_date": logical_date, "go": str(self.go),
               "ready": f"{self.go}.ready", "hold_at": hold_at, "held": str(self.held),
               "release": str(self.unhold)}  # fmt: skip
        self.out = open(self.log_path, "w")  # noqa: SIM115 - closed in result()/kill()
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE), "--run-dag", json.dumps(doc)],
            stdout=self.out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

    def release(self) -> None:
        self.go.touch()

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(60)
        self.out.close()

    def result(self, timeout_s: float = 600) -> dict[str, Any]:
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(
                f"the DAG run did not end in {timeout_s:.0f}s; {self.log_path}"
            ) from None
        self.out.close()
        lines = self.log_path.read_text(errors="replace").strip().splitlines()
        if self.proc.returncode != 0 or not lines or not lines[-1].startswith("{"):
            raise RuntimeError(f"the DAG run exited {self.proc.returncode}; {self.log_path}")
        return json.loads(lines[-1])


# -- the job under traffic -----------------------------------------------------------------------


class Job:
    """A `_demo.scenario.Scenario` (job v1 running, producer on) and its DAG spec."""

    def __init__(self, ctx: Context, case: Case, *, overrides: dict[str, Any] | None = None,
                 application: str | None = None, app_args: tuple[str, ...] = ()):  # fmt: skip
        from airflow_samza_expand._demo.scenario import Scenario

        self.ctx = ctx
        work = ctx.work / case.name.replace("/", "-")
        handover = {"in-place": "auto", "in-app": "auto"}.get(case.strategy, case.strategy)
        # an 8 s liveness TTL (the job's --ttl): a killed processor's lease expires sooner; a
        # broker restart (a ~10 s outage) and a cluster's failover (a dead broker fenced after
        # 6 s, then the group coordinator moved and loaded) need a TTL that outlasts them, as in
        # production: a shorter TTL than the outage loses the job's lease (it then stops, as
        # it did in a CI run where the broker's restart under load outlasted the default 30 s)
        ttl = ["--ttl", "60"] if case.fault in LONG_TTL_FAULTS else ["--ttl", "8"]
        cfg = {"bootstrap": ctx.bootstrap, "work_dir": str(work), "restart": handover,
               "grace_s": 3.0, "poll_s": 0.5, "application_args": [*app_args, *ttl],
               "name": f"fm-{uuid.uuid4().hex[:8]}"}  # fmt: skip
        if ctx.trigger:
            cfg["trigger"] = ctx.trigger
        if application:
            cfg["application"] = application
        self.spec = {"cfg": cfg, "dag_id": f"fault_{cfg['name'].replace('-', '_')}",
                     "overrides": _merged(BOUNDED, overrides or {})}  # fmt: skip
        self.work = work
        work.mkdir(parents=True, exist_ok=True)
        self.s = Scenario(scenario_config(cfg), run_dag=None, task_states=None, xcom=None,
                          log=lambda line: ctx.log(f"  [{case.name}] {line}"))  # type: ignore[arg-type]  # fmt: skip
        self.runs: list[DagRun] = []

    def start(self) -> Job:
        serialize(self.spec)
        self.s.setup()
        self.s.start_producer()
        self.s.start_job()
        return self

    def run(
        self, logical_date: str = A_DATE, *, hold: bool = False, hold_at: str | None = None
    ) -> DagRun:
        run = DagRun(self.spec, logical_date, self.work, hold=hold, hold_at=hold_at)
        self.runs.append(run)
        return run

    def record(self) -> Any:
        records = self.s.store.expansions()
        return records[0] if records else None

    def wait_step(self, run: DagRun, step: str, timeout_s: float = 300) -> None:
        """Until the expansion record shows ``step`` begun (KILL_STEPS names), or the run
        holds it midway (`hold_step_midway`)."""
        deadline = time.monotonic() + timeout_s
        while not (run.held.exists() or began(self.record(), step)):
            if run.proc.poll() is not None:
                raise RuntimeError(f"the run ended before {step!r} began; {run.log_path}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{step!r} never began; {run.log_path}")
            time.sleep(0.02)

    def outcome(self, result: dict[str, Any], strategy: str, *, max_extra: int = 1) -> Outcome:
        """Completed once (see the module docstring), then the job drained, stopped, verified."""
        out = Outcome()
        store = self.s.store
        records = store.expansions()
        versions = [m.version for m in store.job_model_history()]
        grown = self.s.admin.partition_counts([self.s.topic]) == {self.s.topic: 4}
        processors = len(store.processors())
        out.notes.append(f"run={result['state']} processors={processors}")
        out.completed_once = (
            result["state"] == "success"
            and len(records) == 1
            and str(records[0].status) in ("completed", "ExpansionStatus.COMPLETED")
            and versions == [1, 2]
            and grown
            and processors <= PROCESSORS[strategy] + max_extra
        )
        if not out.completed_once:
            status = records[0].status if records else None
            out.notes.append(f"records={len(records)} status={status} versions={versions} "
                             f"grown={grown} tasks={result['tasks']}")  # fmt: skip
        verification = self.s.finish(expected_versions=[1, 2])
        out.exact = (verification.records_produced > 0 and not verification.count_mismatches
                     and verification.records_counted == verification.records_produced)  # fmt: skip
        out.in_order = not verification.order_violations and not verification.count_resets
        if not (out.exact and out.in_order):
            out.notes.append(verification.describe().replace("\n", " | ")[:600])
        return out

    def close(self) -> None:
        for run in self.runs:
            if run.proc.poll() is None:
                run.kill()
        self.s.close()
        kill_leftovers(self.s.job_name)


def job_for(ctx: Context, case: Case, **kwargs: Any) -> Job:
    """The case's job: the shipped job, or (in-app) the supervised example user job."""
    if case.strategy != "in-app":
        return Job(ctx, case, **kwargs)
    from _fault_matrix_inapp import InAppJob

    return InAppJob(ctx, case, **kwargs)


def began(record: Any, step: str) -> bool:
    if record is None:
        return False
    if step == "barrier-grace":  # the grace, before the snapshot
        return "barrier_snapshot" in record.steps
    if step == "barrier-drain":  # the snapshot taken: the barrier task waits for the drain
        snapshot = record.steps.get("barrier_snapshot")
        return "barrier" in record.steps or bool(snapshot and snapshot.ended_at)
    return step in record.steps


def kill_leftovers(job_name: str) -> None:
    """SIGKILL what this case launched and left running (a relaunched standby): the processes
    whose command line names the case's unique job, by pid."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if job_name in cmdline and "--run-dag" not in cmdline:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry.name), signal.SIGKILL)


# -- the cases -----------------------------------------------------------------------------------


def kill_case(ctx: Context, case: Case) -> Outcome:
    """SIGKILL of the run's process group once the step began; then the run cleared."""
    job = job_for(ctx, case).start()
    try:
        hold_at = case.step if case.step in HELD_STEPS else None
        first, cleared = job.run(hold_at=hold_at), job.run(hold=True)
        job.wait_step(first, case.step)
        first.kill()
        at_kill = job.record()
        midway = mid_step(at_kill, case.step)
        steps = sorted(at_kill.steps) if at_kill is not None else []
        ctx.log(f"  [{case.name}] killed; steps begun {steps}; {case.step} midway: {midway}")
        cleared.release()
        out = job.outcome(cleared.result(), case.strategy)
        out.mid_step = midway
        return out
    finally:
        job.close()


def each_step_case(ctx: Context, case: Case) -> Outcome:
    """One expansion killed in every step of the strategy in turn: the run killed midway in
    its first step, its clearing killed midway in the next step, ... until a clearing runs
    to the end. Every kill lands inside its step; the expansion completes once, exactly."""
    job = job_for(ctx, case).start()
    steps = KILL_STEPS[case.strategy]
    held = [s if s in HELD_STEPS else None for s in steps]
    try:
        run, midway = job.run(hold_at=held[0]), []
        for i, step in enumerate(steps):
            nxt = job.run(hold=True, hold_at=held[i + 1] if i + 1 < len(steps) else None)
            job.wait_step(run, step)
            run.kill()
            midway.append(mid_step(job.record(), step))
            ctx.log(f"  [{case.name}] killed in {step}; midway: {midway[-1]}")
            nxt.release()
            run = nxt
        out = job.outcome(run.result(), case.strategy, max_extra=0)
        out.mid_step = all(midway)
        if not out.mid_step:
            out.notes.append(f"midway={dict(zip(steps, midway, strict=True))}")
        return out
    finally:
        job.close()


BROKER_STEPS = {"barrier": "barrier-grace", "handover": "stop", "switch": "write"}


def broker_case(ctx: Context, case: Case) -> Outcome:
    """Apache Kafka restarted on its data directory once the step began (or, ``between``,
    while the job runs before the expansion); the tasks retry."""
    job = job_for(ctx, case, overrides={"retries": 3}).start()
    try:
        if case.step == "between":
            before = job_committed(job)
            ctx.kafka.restart()
            wait_until(lambda: job_committed(job) > before, "the job to commit after the restart",
                       timeout_s=120)  # fmt: skip
            run = job.run()
        else:
            run = job.run()
            job.wait_step(run, BROKER_STEPS[case.step])
            ctx.kafka.restart()
        return job.outcome(run.result(), case.strategy, max_extra=0)
    finally:
        job.close()


def job_committed(job: Job) -> int:
    from airflow_samza_expand._demo.jobs import committed_total

    try:
        return committed_total(job.s.admin, job.s.job_name, job.s.topic)
    except Exception:  # noqa: BLE001 - the broker is coming back
        return -1


def lease_case(ctx: Context, case: Case) -> Outcome:
    """A dies holding the lease; B takes over after the TTL; A cleared later ends skipped."""
    job = job_for(ctx, case, overrides={"ownership": {"lease_ttl_s": LEASE_TTL_S}}).start()
    try:
        a, b, a_again = job.run(), job.run(B_DATE, hold=True), job.run(hold=True)
        job.wait_step(a, "barrier-grace")
        a.kill()
        b.release()
        b_result = b.result()
        after_b = job.record()
        a_again.release()
        a_result = a_again.result()
        after_a = job.record()
        out = job.outcome(b_result, case.strategy, max_extra=0)
        skipped = a_result["tasks"].get("plan") == "skipped"
        untouched = after_a is not None and after_b is not None and after_a == after_b
        out.notes.append(f"a_cleared={a_result['tasks'].get('plan')} untouched={untouched}")
        out.completed_once = out.completed_once and skipped and untouched
        return out
    finally:
        job.close()


def processor_case(ctx: Context, case: Case) -> Outcome:
    """tests/spark/test_spark_processors.py's failover or zombie case on this Apache Kafka."""
    sys.path.insert(0, str(ROOT / "tests" / "spark"))
    import test_spark_processors as procs
    from processor_helpers import JobSetup

    work = ctx.work / case.name.replace("/", "-")
    work.mkdir(parents=True, exist_ok=True)
    job = JobSetup(ctx.bootstrap, lambda p: f"fm-{p}-{uuid.uuid4().hex[:8]}", work)
    job.started = []  # type: ignore[attr-defined]
    test = {"failover": procs.test_two_instances_one_processes_and_a_killed_active_fails_over,
            "zombie": procs.test_zombie_commits_nothing_more_and_stops}[case.step]  # fmt: skip
    try:
        test(job)  # asserts exact counts and no order violation at every stage
        return Outcome(True, True, True)
    finally:
        for proc in job.started:  # type: ignore[attr-defined]
            proc.stop()
        job.store.close()


TRIGGERER_DAG = """\
# an Airflow DAG (the dag-processor's safe mode reads only files naming both words)
import json, sys
sys.path[:0] = {paths!r}
from fault_matrix import build_dag
dag = build_dag(json.loads({spec!r}))
"""


def triggerer_overrides(step: str) -> dict[str, Any]:
    """The DAG settings of a triggerer case: killed in the barrier, a grace long enough for the
    kill to land in it (the barrier settings group's field); one retry per task, as the factory
    gives by default - Airflow 3.3's scheduler fails a deferred task whose trigger fired before
    it handled the worker's exit on deferral (the executor's stale "success" met the task queued
    again: "state changed externally"), which met the barrier of ``triggerer/ack`` once. The
    killed step itself must still end on its first try (`triggerer_case`). Killed in the ack,
    the submit step returns once the job is launched (no start-up check): a cold-restarted job
    that came up within the check's 5 s left no ack to defer (the case's run on 823c1f5)."""
    if step == "barrier":
        return {"retries": 1, "barrier": {"producer_refresh_grace_s": 20.0}}
    return {"retries": 1, "spark": {"submit_kwargs": {"startup_check_s": 0.0}}}


def triggerer_case(ctx: Context, case: Case) -> Outcome:
    """Real Airflow services run the DAG; once the barrier (in its grace) or the ack (cold: the
    restarted job's Spark start) is deferred and its trigger polls in the triggerer, the
    triggerer is SIGKILLed and a new one started: the same trigger goes on there, the task
    keeps its try, the run ends success."""
    af = ctx.services()
    job = Job(ctx, case, overrides=triggerer_overrides(case.step)).start()
    try:
        dag_id = job.spec["dag_id"]
        paths = [str(ROOT), str(HERE.parent)]
        text = TRIGGERER_DAG.format(paths=paths, spec=json.dumps(job.spec))
        (af.dags_folder / f"{dag_id}.py").write_text(text)
        af.wait_dag(dag_id)
        run_id = af.trigger(dag_id)
        old = af.wait_healthy("triggerer")
        before = af.wait_trigger_polls(dag_id, run_id, case.step, old, job.s.store, timeout_s=300)
        af.kill("triggerer")
        af.start_service("triggerer")
        new = af.wait_healthy("triggerer")
        after = af.wait_trigger_polls(dag_id, run_id, case.step, new, job.s.store, timeout_s=300)
        ctx.log(f"  [{case.name}] triggerer {old['id']} killed; {new['id']} runs the trigger")
        state = af.wait_run(dag_id, run_id, timeout_s=600)
        tis = af.task_instances(dag_id, run_id)
        result = {"state": state, "tasks": {t: ti["state"] for t, ti in tis.items()}}
        out = job.outcome(result, case.strategy, max_extra=0)
        resumed = before["trigger"]["id"] == after["trigger"]["id"] and (
            before["try_number"] == tis[case.step]["try_number"] == 1
        )
        out.notes.append(f"resumed={resumed}")
        out.completed_once = out.completed_once and resumed
        return out
    finally:
        job.close()


def wait_until(
    condition: Callable[[], Any], what: str, timeout_s: float = 300, interval_s: float = 0.25
) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(interval_s)


def all_cases() -> list[Case]:
    cases = [
        Case(f"kill/{strategy}/{step}", "sigkill-task", step, strategy, kill_case)
        for strategy, steps in KILL_STEPS.items()
        for step in steps
    ]
    cases += [
        Case("kill/in-place/each-step", "sigkill-task", "each-step", "in-place", each_step_case),
        Case("broker/warm/barrier", "broker-restart", "barrier", "warm", broker_case),
        Case("broker/warm/handover", "broker-restart", "handover", "warm", broker_case),
        Case("broker/in-place/switch", "broker-restart", "switch", "in-place", broker_case),
        Case("broker/in-place/between", "broker-restart", "between", "in-place", broker_case),
        Case("lease/takeover", "lease-takeover", "barrier", "in-place", lease_case),
        Case("triggerer/barrier", "sigkill-triggerer", "barrier", "warm", triggerer_case),
        Case("triggerer/ack", "sigkill-triggerer", "ack", "cold", triggerer_case),
        Case("processor/failover", "sigkill-active", "failover", "standby", processor_case),
        Case("processor/zombie", "sigstop-zombie", "zombie", "standby", processor_case),
    ]
    from _fault_matrix_inapp import in_app_cases
    from _fault_matrix_outage import outage_cases

    return cases + in_app_cases() + outage_cases()


def run_case(ctx: Context, case: Case) -> Outcome:
    started = time.monotonic()
    try:
        out = case.run(ctx, case)
    except Exception as exc:  # noqa: BLE001 - one case's failure is its line, not the end
        out = Outcome(notes=[f"error: {exc!r}"])
        ctx.log(traceback.format_exc())
    ctx.log(
        f"fault={case.fault} step={case.step} strategy={case.strategy} "
        f"completed_once={out.completed_once} exact={out.exact} in_order={out.in_order} "
        + ("" if out.mid_step is None else f"mid_step={out.mid_step} ")
        + f"ok={out.ok} seconds={time.monotonic() - started:.0f}"
        + (f" notes={'; '.join(out.notes)}" if not out.ok else "")
    )
    return out


# -- main ----------------------------------------------------------------------------------------


def prepare_airflow(work: Path, bootstrap: str) -> None:
    """A throwaway Airflow home (demo.airflow_home) with kafka_default and spark_default."""
    from airflow_samza_expand._demo import airflow_home
    from airflow_samza_expand._demo.jobs import spark_connection_env, spark_env

    kafka = json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": bootstrap}})
    spark = spark_connection_env("local[2]")
    airflow_home.prepare(work / "airflow", {"kafka_default": kafka, "spark_default": spark})
    os.environ["PATH"] = spark_env()["PATH"]
    airflow_home.migrate()


def start_kafka(work: Path) -> Any:
    from airflow_samza_expand._testing import ApacheKafkaProcess

    kafka = ApacheKafkaProcess(data_dir=work / "kafka-data", log_path=work / "kafka.log")
    return kafka.start()


@contextlib.contextmanager
def case_lock(path: str | None) -> Iterator[None]:
    """``flock`` of ``path`` (``--lock``) for one case; nothing without it."""
    if path is None:
        yield
        return
    import fcntl

    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cases", default=None, help="comma-separated globs over case names (see --list)"
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help=f"CI size: the one case {SMOKE_CASE} (unless --cases names others)",
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="the cluster fault matrix (_fault_matrix_cluster.py) on a three-node Apache Kafka "
        f"cluster; --smoke: {CLUSTER_SMOKE_CASE}",
    )
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument(
        "--lock",
        help="a file to flock around each case's Spark (a machine shared with other Spark "
        "users: the lock is held one case at a time)",
    )
    parser.add_argument("--run-dag", help=argparse.SUPPRESS)
    parser.add_argument("--work-dir", help="keep logs here (default: a temporary directory)")
    args = parser.parse_args(argv)
    if args.run_dag:
        return run_dag_main(args.run_dag)
    from _fault_matrix_cluster import cluster_cases, start_cluster

    smoke = CLUSTER_SMOKE_CASE if args.cluster else SMOKE_CASE
    globs = (args.cases or (smoke if args.smoke else "*")).split(",")
    listed = cluster_cases() if args.cluster else all_cases()
    cases = [c for c in listed if any(fnmatch.fnmatch(c.name, g) for g in globs)]
    if args.list:
        for case in cases:
            print(case.name)
        return 0
    if not cases:
        print(f"no case matches {args.cases!r} - see --list", file=sys.stderr)
        return 2
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="fault-matrix-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work directory {work}", flush=True)
    kafka = start_cluster(work) if args.cluster else start_kafka(work)
    try:
        prepare_airflow(work, kafka.bootstrap)
        ctx = Context(kafka, work, log=lambda line: print(line, flush=True))
        try:
            passed = 0
            for case in cases:
                with case_lock(args.lock):
                    passed += run_case(ctx, case).ok
        finally:
            ctx.close()
    finally:
        kafka.close()
    figure = "cluster_fault_cases_passed" if args.cluster else "fault_cases_passed"
    print(f"{figure}={passed}/{len(cases)}", flush=True)
    return 0 if passed == len(cases) else 1


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
