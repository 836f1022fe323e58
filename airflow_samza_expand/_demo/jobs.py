"""Launching the shipped PySpark job detached on a local master, stopping it, and measuring how
long a restart keeps it from processing (stopped -> first committed batch of the new run)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_samza_expand._protocol.job import launch as detached
from airflow_samza_expand.dags._job_args import stream_job_args

if TYPE_CHECKING:
    from airflow_samza_expand._kafka.admin import KafkaAdmin
    from airflow_samza_expand.store import CoordinatorStore

JOB_PY = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "spark", "job.py"
)


def spark_submit_binary() -> str:
    """spark-submit beside this interpreter (pip pyspark), else the one on PATH."""
    import shutil

    sibling = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    if os.access(sibling, os.X_OK):
        return sibling
    found = shutil.which("spark-submit")
    if not found:
        raise FileNotFoundError(
            "spark-submit not found - install pyspark into this environment (bash scripts/setup.sh)"
        )
    return found


def spark_env() -> dict[str, str]:
    """Environment of a local Spark run: workers and driver use this interpreter."""
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    bindir = os.path.dirname(sys.executable)
    if bindir not in env.get("PATH", "").split(os.pathsep):
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    return env


LOCAL_SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.driver.memory": "768m",
    "spark.sql.streaming.noDataProgressEventInterval": "1000",
}


@dataclass
class StreamJob:
    """One stream job: its arguments and the handle of its running detached launch."""

    job_name: str
    args: list[str]
    log_dir: str
    master: str = "local[2]"
    handle: dict[str, Any] | None = None
    application: str = JOB_PY  # or a job of your own on spark.runtime
    conf: Mapping[str, str] | None = None  # added to LOCAL_SPARK_CONF

    def command(self) -> list[str]:
        cmd = [spark_submit_binary(), "--master", self.master]
        for key, value in {**LOCAL_SPARK_CONF, **(self.conf or {})}.items():
            cmd += ["--conf", f"{key}={value}"]
        return [*cmd, self.application, *self.args]

    def launch(self) -> dict[str, Any]:
        log_path = os.path.join(self.log_dir, f"{self.job_name}-{time.strftime('%H%M%S')}.log")
        self.handle = detached.launch(self.command(), log_path=log_path, env=spark_env())
        return self.handle

    def terminate(self) -> None:
        if self.handle is not None and detached.is_running(self.handle):
            detached.terminate(self.handle)


def wait_for(
    what: str, check: Any, *, timeout_s: float, interval_s: float = 0.25, log: Any = None
) -> Any:
    """Poll ``check()`` until it returns a truthy value; TimeoutError naming ``what``.

    A check that raises `KafkaUnavailableError` (a broker or group coordinator that moves,
    answering NOT_COORDINATOR or no leader for a moment) is not an answer yet: it is asked
    again until the timeout, whose error names the last such fault."""
    from airflow_samza_expand._kafka.errors import KafkaUnavailableError

    deadline = time.monotonic() + timeout_s
    next_log = time.monotonic() + 15
    fault: KafkaUnavailableError | None = None
    while True:
        try:
            value = check()
        except KafkaUnavailableError as exc:
            value, fault = None, exc
        if value:
            return value
        if time.monotonic() > deadline:
            last = f" (last: {fault})" if fault is not None else ""
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}{last}")
        if log is not None and time.monotonic() > next_log:
            log(f"... still waiting for {what}" + (f" (Kafka: {fault})" if fault else ""))
            next_log = time.monotonic() + 15
        time.sleep(interval_s)


def running_processors(store: CoordinatorStore, version: int) -> list[str]:
    return sorted(
        pid
        for pid, p in store.processors().items()
        if p.get("job_model_version") == version and p.get("state") == "running"
    )


def committed_total(admin: KafkaAdmin, group: str, topic: str) -> int:
    count = admin.partition_counts([topic])[topic]
    offsets = admin.group_offsets(group, {topic: range(count)})[topic]
    return sum(o or 0 for o in offsets.values())


def caught_up(admin: KafkaAdmin, group: str, topic: str) -> bool:
    """True when the group committed every partition of ``topic`` to its high watermark."""
    count = admin.partition_counts([topic])[topic]
    highs = admin.high_watermarks({topic: range(count)})[topic]
    offsets = admin.group_offsets(group, {topic: range(count)})[topic]
    return all((offsets.get(p) or 0) >= highs[p] for p in range(count))


def stop_job(
    store: CoordinatorStore, version: int, *, timeout_s: float = 180.0, log: Any = None
) -> float:
    """Request a stop of ``version`` and wait until a processor of it ended and no live one
    works on it (a driver killed while it ran, silent past its TTL, does not hold the stop, as
    in the product's stop); returns the time."""
    from airflow_samza_expand.core._liveness import FINAL_STATES, blocking_stop

    store.request_stop(version, "demo")

    def stopped() -> bool:
        processors = store.processors()
        ended = any(
            p.get("job_model_version") == version and p.get("state") in FINAL_STATES
            for p in processors.values()
        )
        return ended and not blocking_stop(processors, version)

    wait_for(f"job model v{version} to stop", stopped, timeout_s=timeout_s, log=log)
    return time.monotonic()


def measure_restart(
    job: StreamJob,
    store: CoordinatorStore,
    admin: KafkaAdmin,
    *,
    topic: str,
    version: int,
    timeout_s: float = 300.0,
    log: Any = None,
) -> float:
    """Plain restart of the running job on the same job model: stop, relaunch; seconds from
    stopped to the first batch the new run commits."""
    stopped_at = stop_job(store, version, log=log)
    before = committed_total(admin, job.job_name, topic)
    store.clear_stop()
    if job.handle is not None:
        handle = job.handle
        wait_for("the stopped job to exit", lambda: not detached.is_running(handle), timeout_s=60)
    job.launch()
    wait_for(
        "the restarted job's first committed batch",
        lambda: committed_total(admin, job.job_name, topic) > before,
        timeout_s=timeout_s,
        interval_s=0.1,
        log=log,
    )
    return time.monotonic() - stopped_at


def job_args(
    *,
    job_name: str,
    bootstrap: str,
    checkpoint_dir: str,
    output_topic: str,
    trigger: str,
    extra: Sequence[str] = (),
) -> list[str]:
    """Arguments of the shipped job, built by ``dags.stream_job_args`` (so the demo's DAGs are
    built for the shipped job, which they launch)."""
    return stream_job_args(
        job_name=job_name, bootstrap_servers=bootstrap, checkpoint_dir=checkpoint_dir,
        output_topic=output_topic, trigger=trigger,
        extra=["--shuffle-partitions", "2", "--max-records-per-batch", "5000", *extra],
    )  # fmt: skip


def spark_connection_env(master: str = "local[2]") -> str:
    """``AIRFLOW_CONN_SPARK_DEFAULT`` value for a Spark connection to ``master``."""
    import json

    return json.dumps({"conn_type": "spark", "host": master})


def conf_items(conf: Mapping[str, str]) -> list[str]:
    return [f"{k}={v}" for k, v in conf.items()]
