"""Wall time of a multi-job expansion: one job vs two jobs on one topic, same run.

``dag.test()`` runs one task at a time, so it shows the sum of the jobs' chains, not what a
scheduler does. This benchmark runs the factory's DAG (``jobs=[...]``, the real operators and
sensors, in poke mode) through a small in-process scheduler: one thread per task, each starting
when its upstream tasks succeeded - a scheduler with a free slot for every ready task, without
its polling delay. The two jobs' task groups then run side by side after the one growth, as
they would under a real scheduler (LocalExecutor, CeleryExecutor).

Each case: a fresh 2-partition topic with a keyed producer (40 records/s), the jobs running on
v1 (local[2], continuous: job a `SequenceCounter`, job b `_testing.keyed.SequenceDigest`), then
the timed DAG run (plan .. report, topic 2 -> 4), then every job's outputs are verified exact.
Setup and verification are not timed.

Uses KAFKA_BOOTSTRAP_SERVERS if set, else starts the development broker. Starts Spark: run it
under ``flock /tmp/spark.lock``. Figures only (a shared machine gives noisy ones). Last line:

    one_job_s=<x> two_jobs_s=<y> ratio=<y/x>
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

RUN_ID = "benchmark__multi_job"


def say(text: str) -> None:
    print(f"[multi_job {time.strftime('%H:%M:%S')}] {text}", flush=True)


class TaskInstanceStub:
    """What the operators use of a task instance: ids, XComs, the run's task states."""

    def __init__(self, dag_id: str, task_id: str, xcoms: dict, states: dict) -> None:
        self.dag_id, self.task_id, self.run_id, self.try_number = dag_id, task_id, RUN_ID, 1
        self.map_index = -1
        self._xcoms, self._states = xcoms, states

    def xcom_pull(self, task_ids: str | None = None, key: str = "return_value", **_: Any) -> Any:
        return self._xcoms.get((task_ids or self.task_id, key))

    def xcom_push(self, key: str, value: Any) -> None:
        self._xcoms[(self.task_id, key)] = value

    def get_task_states(self, **_: Any) -> dict[str, dict[str, str]]:
        return {RUN_ID: dict(self._states)}


def run_concurrently(dag: Any) -> tuple[dict[str, str], dict[tuple[str, str], Any]]:
    """Run every task of ``dag`` once its upstream tasks are done; returns the task states and
    the XComs ``{(task_id, key): value}``.
    Trigger rules: ``all_success`` (an upstream not successful -> upstream_failed) or any
    other rule (runs once the upstream tasks are done)."""
    from airflow.sdk.exceptions import AirflowSkipException

    xcoms: dict[tuple[str, str], Any] = {}
    states: dict[str, str] = {}
    done = {task_id: threading.Event() for task_id in dag.task_dict}

    def run(task: Any) -> None:
        try:
            for up in task.upstream_task_ids:
                done[up].wait()
            ups = [states[u] for u in task.upstream_task_ids]
            if str(task.trigger_rule) == "all_success" and any(s != "success" for s in ups):
                states[task.task_id] = "upstream_failed"
                return
            ti = TaskInstanceStub(dag.dag_id, task.task_id, xcoms, states)
            context = {"ti": ti, "task_instance": ti, "params": {}, "run_id": RUN_ID}
            task.render_template_fields(context)
            if hasattr(task, "deferrable"):
                task.deferrable = False  # poke in this thread instead of a triggerer
            started = time.monotonic()
            try:
                xcoms[(task.task_id, "return_value")] = task.execute(context)
                states[task.task_id] = "success"
            except AirflowSkipException:
                states[task.task_id] = "skipped"
            say(f"{task.task_id}: {states[task.task_id]} ({time.monotonic() - started:.1f} s)")
        except Exception:  # noqa: BLE001 - a failed task is a state, as in Airflow
            states[task.task_id] = "failed"
            say(f"{task.task_id}: failed\n{traceback.format_exc(limit=5)}")
        finally:
            done[task.task_id].set()

    threads = [threading.Thread(target=run, args=(t,), daemon=True) for t in dag.tasks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return states, xcoms


def run_case(
    bootstrap: str, work: Path, processors: list[str], grace_s: float,
    keys: int = 24, rate: float = 40.0,
) -> float:  # fmt: skip
    """Set up ``len(processors)`` jobs on a fresh topic, time one expansion run, verify."""
    from airflow_samza_expand._demo.multi import MultiJobScenario
    from airflow_samza_expand._demo.scenario import ScenarioConfig

    cfg = ScenarioConfig(bootstrap=bootstrap, work_dir=work, keys=keys, rate=rate, grace_s=grace_s)
    m = MultiJobScenario(cfg, processors, run_dag=None, task_states=None, xcom=None, log=say)
    try:
        m.setup()
        m.start_producer()
        m.start_jobs()
        dag = m.build_dag(f"bench_{cfg.name.replace('-', '_')}")
        started = time.monotonic()
        states, xcoms = run_concurrently(dag)
        wall = time.monotonic() - started
        for side in m.sides:  # the jobs are now the ones the submit tasks launched
            handle = xcoms.get((f"{side.name}.submit", "return_value"))
            if isinstance(handle, dict) and "pgid" in handle:
                side.job.handle = dict(handle)
        bad = {t: s for t, s in states.items() if s != "success"}
        if bad:
            raise RuntimeError(f"the expansion run did not succeed: {bad}")
        results = m.finish(expected_versions=[1, 2])
        for name, result in results.items():
            say(f"{name}: {result.describe()}")
            if not result.ok:
                raise RuntimeError(f"{name}: outputs not exact after the expansion")
        say(f"{len(processors)} job(s): expansion run {wall:.1f} s")
        return wall
    finally:
        m.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grace", type=float, default=4.0, help="producer refresh grace (s)")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="CI size: 8 keys at 10 records/s, a 1 s grace (same code and last line; still "
        "starts Spark for every job)",
    )
    opts = parser.parse_args(argv)
    keys, rate = (8, 10.0) if opts.smoke else (24, 40.0)
    if opts.smoke:
        opts.grace = 1.0
    home = Path(tempfile.mkdtemp(prefix="samza-expand-bench-multi-"))
    from airflow_samza_expand._demo import airflow_home
    from airflow_samza_expand._demo.jobs import spark_connection_env

    broker = None
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if not bootstrap:
        from airflow_samza_expand._testing import DevBrokerProcess

        broker = DevBrokerProcess(log_path=home / "broker.log")
        broker.start()
        bootstrap = broker.bootstrap
    kafka = json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": bootstrap}})
    airflow_home.prepare(
        home / "airflow",
        {"kafka_default": kafka, "spark_default": spark_connection_env("local[2]")},
    )
    airflow_home.migrate()
    from airflow_samza_expand._testing.keyed import PATH as DIGEST
    from airflow_samza_expand.spark._processor import DEFAULT_PROCESSOR

    try:
        one = run_case(bootstrap, home / "one", [DEFAULT_PROCESSOR], opts.grace, keys, rate)
        two = run_case(bootstrap, home / "two", [DEFAULT_PROCESSOR, DIGEST], opts.grace, keys, rate)
    finally:
        if broker is not None:
            broker.close()
    print(f"one_job_s={one:.1f} two_jobs_s={two:.1f} ratio={two / one:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
