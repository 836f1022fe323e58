"""What a scenario runs (`ScenarioConfig`), what one expansion gave (`ExpansionOutcome`), the
expansion DAG's settings for it, and what the embedded stack needs (`env_problems`)."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow_samza_expand._demo.jobs import LOCAL_SPARK_CONF, spark_env

MID_BARRIER = "mid-barrier"


@dataclass
class ScenarioConfig:
    bootstrap: str
    work_dir: Path
    run_mode: str = "continuous"  # or "available-now"
    # the continuous job's trigger (its micro-batch cadence; the demo measures gaps against it)
    trigger: str = "processing-time=500ms"
    keys: int = 40
    rate: float = 60.0  # records per second
    refresh_ms: int = 1000  # producer metadata refresh
    grace_s: float = 4.0  # producer refresh grace of the barrier (>= refresh + delivery)
    poll_s: float = 1.0  # sensor poll interval
    naive: bool = False  # write job models with plain GroupByPartition (must fail the check)
    on_stale_placement: str = "warn"  # "fail" fails the report on an order at risk
    stale_quiet_s: float | None = None  # stale placements' quiet window (None: min(30 s, grace))
    master: str = "local[2]"
    # a second input stream the job reads (a join's other side) that the expansions never grow
    second_stream: bool = False
    # the PySpark application (None: the shipped job) and its own extra arguments; one of
    # your own must be on spark.runtime (examples/user_job.py); it gets Spark's Kafka connector
    application: str | None = None
    application_args: tuple[str, ...] = ()
    # more Spark settings of the job and of the restarts the DAG launches (e.g. Spark's Kafka
    # consumer pool: spark.kafka.consumer.cache.capacity for more than 64 partitions)
    spark_conf: dict[str, str] | None = None
    # the DAG's restart (RestartSettings.restart); "auto" picks in-place for the shipped job
    restart: str = "warm"
    # the user's "start vN+1" task (RestartSettings.task: an operator, or a callable
    # job name -> operator) in place of spark-submit
    restart_task: Any = None
    name: str = field(default_factory=lambda: f"demo-{uuid.uuid4().hex[:8]}")


@dataclass
class ExpansionOutcome:
    factor: int
    counts: tuple[int, int]
    state: str
    summary: dict[str, Any] | None
    tasks: dict[str, str]
    probe: dict[str, float | None]
    wall_s: float
    standby_took_over: bool = False  # the vN+1 standby took over (the submit launched nothing)
    restart: str | None = None  # the chosen restart: "in-place", "in-app", "task", "warm", "cold"


def dag_settings(
    cfg: ScenarioConfig,
    job: dict[str, Any],
    log_dir: str | None,
    overrides: dict[str, Any] | None = None,
) -> Any:
    """The expansion DAG's settings of a local scenario: the ``job`` group's fields, Spark on
    this interpreter (launch logs in ``log_dir``), the scenario's grace, poll interval and
    order settings, generous timeouts, one quick retry; then ``overrides`` (a group's fields as
    ``{group: {field: value}}``, or a setting of the steps such as ``retries``)."""
    from airflow_samza_expand.dags import ExpansionSettings
    from airflow_samza_expand.dags._groups import GROUPS

    spark = {
        "conf": {**LOCAL_SPARK_CONF, **application_conf(cfg)},
        "env_vars": {"PYSPARK_PYTHON": spark_env()["PYSPARK_PYTHON"]},
        "log_dir": log_dir,
        **({"application": cfg.application, "application_on_runtime": True}
           if cfg.application else {}),
    }  # fmt: skip
    groups = {
        "job": job,
        "spark": spark,
        "barrier": {"producer_refresh_grace_s": cfg.grace_s, "barrier_timeout_s": 600,
                    "on_stale_placement": cfg.on_stale_placement,
                    "stale_quiet_s": cfg.stale_quiet_s},
        "restart": {"restart": cfg.restart, "stop_timeout_s": 300, "ack_timeout_s": 600,
                    **({"task": cfg.restart_task} if cfg.restart_task is not None else {})},
    }  # fmt: skip
    for group, fields in (overrides or {}).items():
        if isinstance(fields, dict):
            groups[group] = {**groups.get(group, {}), **fields}
    steps = {k: v for k, v in (overrides or {}).items() if not isinstance(v, dict)}
    built = {name: GROUPS[name](**fields) for name, fields in groups.items()}
    steps = {"poll_interval_s": cfg.poll_s, "retries": 1, "retry_delay": timedelta(seconds=2),
             **steps}  # fmt: skip
    return ExpansionSettings(**built, **steps)


def application_conf(cfg: ScenarioConfig) -> dict[str, str]:
    """Spark settings of the job: a job of your own needs Spark's Kafka connector (fetched
    once); then the scenario's own (``spark_conf``)."""
    conf = dict(cfg.spark_conf or {})
    if not cfg.application:
        return conf
    from airflow_samza_expand._testing.spark_kafka import connector_jars

    return {"spark.jars": ",".join(connector_jars()), **conf}


def env_problems() -> list[str]:
    """What is missing for the embedded stack (Java, spark-submit), as fix-it messages."""
    import shutil

    problems = []
    java_home = os.environ.get("JAVA_HOME")
    java = shutil.which("java") or (os.path.join(java_home, "bin", "java") if java_home else None)
    if not java or not os.access(java, os.X_OK):
        problems.append(
            "no Java found (java not on PATH, JAVA_HOME unset) - install Java 17, e.g. "
            "`apt-get install openjdk-17-jre-headless`, or set JAVA_HOME"
        )
    try:
        from airflow_samza_expand._demo.jobs import spark_submit_binary

        spark_submit_binary()
    except FileNotFoundError as exc:
        problems.append(str(exc))
    return problems


__all__ = [
    "MID_BARRIER",
    "ExpansionOutcome",
    "ScenarioConfig",
    "application_conf",
    "dag_settings",
    "env_problems",
]
