"""Submitting the stream job from a DAG without holding a worker slot while it runs.

`SubmitStreamJobOperator` is the apache-spark provider's ``SparkSubmitOperator`` with a run mode:

* ``available-now``: a plain ``SparkSubmitOperator`` run - the job processes what is there and
  ends, and so does the task.
* ``continuous`` on a cluster deploy mode: ``spark.{yarn,kubernetes,standalone}.submit.
  waitAppCompletion=false`` (Kubernetes: ``spark.kubernetes.submission.waitAppCompletion``),
  so spark-submit returns once the application is accepted; the task returns its id.
* ``continuous`` on a local master (or client deploy mode): a detached launch
  (`detached.launch`) whose handle ``{pid, pgid, log_path, state_path, ...}`` is returned after
  a short start-up check.

Either way the acknowledgement sensor (``JobModelAckSensor``) then confirms the job runs.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_samza_expand.dags import detached

RUN_MODES = ("continuous", "available-now")
WAIT_APP_COMPLETION_CONFS = (
    "spark.yarn.submit.waitAppCompletion",
    "spark.kubernetes.submission.waitAppCompletion",
    "spark.standalone.submit.waitAppCompletion",
)


def normalise_run_mode(value: Any) -> str:
    """``continuous`` or ``available-now`` (also ``available_now``); clear error otherwise."""
    mode = str(value).strip().lower().replace("_", "-")
    if mode not in RUN_MODES:
        raise AirflowFailException(
            f"run mode {value!r} is not known - use 'continuous' (a streaming job that keeps "
            "running) or 'available-now' (scheduled runs that end)"
        )
    return mode


def detached_conf(conf: dict[str, Any] | None) -> dict[str, Any]:
    """``conf`` plus ``waitAppCompletion=false`` for every cluster manager (explicit values win)."""
    merged = dict(conf or {})
    for key in WAIT_APP_COMPLETION_CONFS:
        merged.setdefault(key, "false")
    return merged


def _ensure_spark_submit_on_path(binary: str) -> None:
    """spark-submit installed beside this interpreter (a pip pyspark) but not on PATH: add it."""
    if shutil.which(binary):
        return
    sibling = os.path.join(os.path.dirname(sys.executable), binary)
    if os.access(sibling, os.X_OK):
        os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]
        return
    raise AirflowFailException(
        f"{binary!r} is not on PATH - install Spark (or pyspark) on the worker, or set the "
        "spark connection's extra 'spark-binary'"
    )


class SubmitStreamJobOperator(SparkSubmitOperator):
    """``SparkSubmitOperator`` that returns once a continuous job runs (see module docstring).

    Extra arguments: ``run_mode`` (templated), ``log_dir`` for detached launches (default
    ``<tmp>/samza-expand/<name>``), ``startup_check_s`` (a detached job that exits within this
    time fails the task with its log tail). Returns (XCom) ``{mode, master, deploy_mode, ...}``
    plus the detached handle or the cluster application id.
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "run_mode", "log_dir")
    ui_color = "#ffe5b4"

    def __init__(
        self,
        *,
        run_mode: str = "continuous",
        log_dir: str | None = None,
        startup_check_s: float = 5.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.run_mode = run_mode
        self.log_dir = log_dir
        self.startup_check_s = startup_check_s

    def execute(self, context: Any) -> dict[str, Any]:
        mode = normalise_run_mode(self.run_mode)
        self.application_args = [str(a) for a in (self.application_args or [])]
        if mode == "continuous":
            self.conf = detached_conf(self.conf)
        hook = self._get_hook()
        master = hook._connection["master"]
        deploy_mode = hook._connection["deploy_mode"] or "client"
        _ensure_spark_submit_on_path(hook._connection["spark_binary"])
        base = {"mode": mode, "master": master, "deploy_mode": deploy_mode}
        if mode == "available-now":
            self.log.info(
                "Running the job once (available-now) on %s; the task ends with it.", master
            )
            self._hook = hook
            super().execute(context)
            return {**base, "exit_code": 0}
        if deploy_mode == "cluster":
            return {**base, **self._submit_cluster(hook)}
        return {**base, **self._launch_detached(hook)}

    def _submit_cluster(self, hook: Any) -> dict[str, Any]:
        """spark-submit with waitAppCompletion=false: returns once the cluster accepted the app."""
        if hook._is_kubernetes:
            hook._track_driver_via_k8s_api = True  # the hook then skips the pod-exit check
        self.log.info(
            "Submitting the continuous job to %s (cluster mode, not waiting).",
            hook._connection["master"],
        )
        driver_id = hook.submit(self.application)
        return {
            "driver_id": driver_id,
            "yarn_application_id": hook._yarn_application_id,
            "kubernetes_driver_pod": hook._kubernetes_driver_pod,
        }

    def _launch_detached(self, hook: Any) -> dict[str, Any]:
        cmd = hook._build_spark_submit_command(self.application)
        env = dict(os.environ)
        env.update({k: str(v) for k, v in (hook._env or {}).items()})
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        log_dir = self.log_dir or os.path.join(tempfile.gettempdir(), "samza-expand", self.name)
        log_path = os.path.join(
            log_dir, f"spark-submit-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.log"
        )
        handle = detached.launch(cmd, log_path=log_path, env=env)
        self.log.info(
            "Launched the continuous job detached: pid %s (process group %s), log %s.",
            handle["pid"],
            handle["pgid"],
            handle["log_path"],
        )
        deadline = time.monotonic() + self.startup_check_s
        while time.monotonic() < deadline:
            code = detached.exit_code(handle)
            if code is not None:
                log_path = handle["log_path"]
                raise AirflowException(
                    f"the detached spark-submit exited with {code} within "
                    f"{self.startup_check_s:.0f} s - its log ({log_path}) ends with:\n"
                    f"{detached.tail(log_path)}"
                )
            time.sleep(0.5)
        return {"detached": True, **handle}
