"""The deployment snippets of docs/deployments.md ("A job under a cluster manager") parse, name
the runtime's flags, and restart on failure only within a bound - cheap, no cluster needed."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import yaml

from airflow_samza_expand.spark._args import parse_args

DOC = Path(__file__).resolve().parents[2] / "docs" / "deployments.md"


def blocks(language: str) -> list[str]:
    section = DOC.read_text().split("## A job under a cluster manager", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.S)


def runtime_args(argv: list[str]) -> None:
    """The runtime's own parser takes the arguments (the checkpoint and job name given)."""
    args, _ = parse_args(argv, {})
    assert args.job_name == "orders-counter" and args.checkpoint_dir and args.kafka_config


def test_the_spark_operator_application_parses_and_restarts_on_failure_only() -> None:
    (text,) = blocks("yaml")
    app = yaml.safe_load(text)
    assert app["kind"] == "SparkApplication" and app["spec"]["mode"] == "cluster"
    policy = app["spec"]["restartPolicy"]
    assert policy["type"] == "OnFailure" and policy["onFailureRetries"] > 0
    runtime_args(app["spec"]["arguments"])


def test_the_yarn_submit_is_cluster_mode_with_bounded_attempts() -> None:
    (text,) = blocks("bash")
    argv = shlex.split(text.replace("\\\n", " "))
    assert argv[:5] == ["spark-submit", "--master", "yarn", "--deploy-mode", "cluster"]
    assert "spark.yarn.maxAppAttempts=4" in argv
    runtime_args(argv[argv.index("user_job.py") + 1 :])


def test_the_databricks_job_parses_and_retries_failed_runs() -> None:
    (text,) = blocks("json")
    job = json.loads(text)
    (task,) = job["tasks"]
    assert job["max_concurrent_runs"] == 1 and task["max_retries"] > 0
    runtime_args(task["spark_python_task"]["parameters"])
