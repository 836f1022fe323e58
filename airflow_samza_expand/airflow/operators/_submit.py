"""SubmitStreamJobOperator: the apache-spark provider's ``SparkSubmitOperator`` with a run mode,
built on the provider's public API (``SparkSubmitHook(...)`` and ``hook.submit(...)``).

* ``available-now``: a plain run - the job processes what is there and ends, and so does the task.
* ``continuous`` on a cluster deploy mode: ``spark.{yarn,kubernetes,standalone}.submit.
  waitAppCompletion=false``, so spark-submit returns once the application is accepted.
* ``continuous`` on a local master (or client deploy mode): ``hook.submit`` runs spark-submit
  through the detached launcher (``_protocol.job.launch``, as the ``executable`` of the Popen the
  hook starts), which returns once the job runs; the task returns its handle.

With ``job_name`` and ``expansion_id`` it keeps the expansion's books: no second launch of a
continuous job that already runs the new model, the (redacted) handle in the record.
Secret-looking ``conf`` values (Airflow's secrets masker decides) are masked in the task log
and appear in no XCom, record or file. With ``job_kafka_config_id`` the job gets that Kafka
connection (its own principal, e.g. SASL) as ``--kafka-config FILE``: an owner-only (0600) file
in the log directory (``_kafka.config_file``), so no password is on the spark-submit command line.
OpenLineage (`airflow._lineage`): the job's input topics (job model in force) as inputs; with
``openlineage_inject_parent_job_info`` / ``openlineage_inject_transport_info`` (defaults: the
``[openlineage] spark_inject_*`` settings) the parent job and transport reach the Spark
application as ``spark.openlineage.*`` conf, as ``SparkSubmitOperator`` does.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseHook, BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from airflow_samza_expand._protocol.job import launch as detached
from airflow_samza_expand._protocol.secrets import redact_conf, redact_doc, secret_values
from airflow_samza_expand.airflow import _lineage
from airflow_samza_expand.airflow._compat import airflow_hides_key, openlineage_injection
from airflow_samza_expand.airflow._order import with_order_check
from airflow_samza_expand.airflow._shell import protocol_outcomes
from airflow_samza_expand.airflow.hooks import DEFAULT_COORDINATOR
from airflow_samza_expand.airflow.operators._submit_books import SubmitBooks
from airflow_samza_expand.core._modes import RunMode
from airflow_samza_expand.core._secrets import is_secret_key

log = logging.getLogger(__name__)

RUN_MODES = RunMode.values()
WAIT_APP_COMPLETION_CONFS = (
    "spark.yarn.submit.waitAppCompletion",
    "spark.kubernetes.submission.waitAppCompletion",
    "spark.standalone.submit.waitAppCompletion",
)
# SparkSubmitOperator arguments that are SparkSubmitHook constructor arguments too.
_HOOK_ARGS = (
    "files",
    "py_files",
    "archives",
    "driver_class_path",
    "jars",
    "java_class",
    "packages",
    "exclude_packages",
    "repositories",
    "total_executor_cores",
    "executor_cores",
    "executor_memory",
    "driver_memory",
    "keytab",
    "principal",
    "proxy_user",
    "num_executors",
    "status_poll_interval",
    "verbose",
    "spark_binary",
    "properties_file",
    "yarn_queue",
    "deploy_mode",
    "use_krb5ccache",
    "post_submit_commands",
)


def normalise_run_mode(value: Any) -> RunMode:
    """``continuous`` or ``available-now`` (also ``available_now``); AirflowFailException
    naming the value and the choices otherwise (a refusal: not retried)."""
    try:
        return RunMode.parse(value, "run_mode")
    except ValueError as exc:
        raise AirflowFailException(
            f"{exc} ('continuous': a streaming job that keeps running; 'available-now': "
            "scheduled runs that end)"
        ) from None


def detached_conf(conf: dict[str, Any] | None) -> dict[str, Any]:
    """``conf`` plus ``waitAppCompletion=false`` for every cluster manager (explicit values win)."""
    merged = dict(conf or {})
    for key in WAIT_APP_COMPLETION_CONFS:
        merged.setdefault(key, "false")
    return merged


def is_secret_conf_key(key: str) -> bool:
    """Airflow's secrets masker decides (its sensitive field names), with this project's
    patterns (password, secret, token, credential, sasl.*) as well."""
    return airflow_hides_key(key) or is_secret_key(key)


def _binary_path(binary: str) -> str:
    """spark-submit on PATH, or beside this interpreter (a pip pyspark)."""
    found = shutil.which(binary) or shutil.which(
        os.path.join(os.path.dirname(sys.executable), binary)
    )
    if not found:
        raise AirflowFailException(
            f"{binary!r} is not on PATH - install Spark (or pyspark) on the worker, or set the "
            "spark connection's extra 'spark-binary'"
        )
    return found


class SubmitStreamJobOperator(_lineage.ReportsLineage, SparkSubmitOperator):
    """``SparkSubmitOperator`` that returns once a continuous job runs (module docstring).

    Extra arguments: ``run_mode`` (templated), ``log_dir`` for detached launches (default
    ``<tmp>/samza-expand/<name>``), ``startup_check_s`` (a detached job that exits within this
    time fails the task with its log tail), ``launch_window_s`` (how long a retry on any worker
    waits for this launch's processor to heartbeat before it launches again; `_protocol.
    launches`), ``job_name``/``expansion_id``/``coordinator``/
    ``kafka_config_id`` (the expansion's books), ``on_stale_placement`` (``warn``/``fail``,
    templated: turns on the shipped job's order check, `airflow._order.with_order_check`).
    Returns (XCom) ``{mode, master, deploy_mode, conf (redacted), ...}`` plus the detached
    handle or the cluster submission's result.
    """

    template_fields: Sequence[str] = (
        *SparkSubmitOperator.template_fields,
        "run_mode",
        "log_dir",
        "job_name",
        "expansion_id",
        "on_stale_placement",
    )
    ui_color = "#ffe5b4"

    def __init__(
        self,
        *,
        run_mode: str = "continuous",
        log_dir: str | None = None,
        startup_check_s: float = 5.0,
        launch_window_s: float = detached.LAUNCH_WINDOW_S,
        job_name: str | None = None,
        expansion_id: str | None = None,
        coordinator: str = DEFAULT_COORDINATOR,
        kafka_config_id: str = "kafka_default",
        job_kafka_config_id: str | None = None,
        on_stale_placement: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.hook_args = {k: kwargs[k] for k in _HOOK_ARGS if k in kwargs}
        self.spark_conn_id = kwargs.get("conn_id", "spark_default")
        super().__init__(**kwargs)
        self.run_mode = run_mode
        self.log_dir = log_dir
        self.startup_check_s = startup_check_s
        self.launch_window_s = launch_window_s
        self.job_name = job_name
        self.expansion_id = expansion_id
        self.coordinator = coordinator
        self.kafka_config_id = kafka_config_id
        self.job_kafka_config_id = job_kafka_config_id
        self.on_stale_placement = on_stale_placement  # the job's order check

    def _log_dir(self) -> str:
        return self.log_dir or os.path.join(tempfile.gettempdir(), "samza-expand", self.name)

    def _job_kafka_config(self, conf: dict[str, Any]) -> None:
        """``--kafka-config FILE`` (0600) from ``job_kafka_config_id``, added to the job's
        arguments; SecretValueError if a secret of it is in the arguments or conf anyway."""
        if not self.job_kafka_config_id:
            return
        from airflow.sdk.log import mask_secret

        from airflow_samza_expand._kafka import config_file
        from airflow_samza_expand.airflow.hooks import SamzaExpandKafkaHook

        config = SamzaExpandKafkaHook(kafka_config_id=self.job_kafka_config_id).client_config()
        for value in config_file.secret_items(config).values():
            mask_secret(value)
        path = config_file.write_config_file(config, directory=self._log_dir())
        args = [*map(str, self.application_args or []), *config_file.job_kafka_args(path)]
        config_file.check_free_of_secrets([*args, *map(str, conf.values())], config)
        self.application_args = args
        self.log.info("The job reads Kafka connection %r from %s (mode 0600).",
                      self.job_kafka_config_id, path)  # fmt: skip

    def spark_hook(self, conf: dict[str, Any], env: dict[str, Any]) -> SparkSubmitHook:
        return SparkSubmitHook(
            conf=conf,
            conn_id=self.spark_conn_id,
            name=self.name,
            application_args=[str(a) for a in (self.application_args or [])],
            env_vars=env or None,
            **{k: getattr(self, k, v) for k, v in self.hook_args.items()},  # rendered if templated
        )

    def execute(self, context: Any) -> dict[str, Any]:
        mode = normalise_run_mode(self.run_mode)
        if self.on_stale_placement is not None:
            self.application_args = with_order_check(
                self.application_args or [], self.on_stale_placement
            )
        parent_job, transport = openlineage_injection(self)  # SparkSubmitOperator's, >= 5.1
        conf = _lineage.spark_conf_with_parent_job(
            self.conf, context, parent_job=parent_job, transport=transport
        )
        conf = detached_conf(conf) if mode == "continuous" else conf
        secret_keys = [k for k in conf if is_secret_conf_key(str(k))]
        secrets = secret_values(conf, is_secret_conf_key)
        from airflow.sdk.log import mask_secret

        for value in secrets:
            mask_secret(value)
        master, deploy_mode, binary = self._connection()
        base = {
            "mode": mode,
            "master": master,
            "deploy_mode": deploy_mode,
            "conf": redact_conf(conf, is_secret_conf_key),
        }
        books = self.expansion_books()
        skip = books.before(context, mode)
        self.record_lineage(books.lineage)
        if skip is not None:  # the job runs vN+1 already, or takes it itself: the step ends here
            self.log.info("Launching nothing: %s.", skip.get("reason"))
            result = redact_doc({**base, **skip}, secrets)
            books.after(context, result)
            return result
        if not self.application:  # a DAG naming no application never launches the job
            raise AirflowFailException(
                f"job {self.job_name or self.name!r} must be started on its newest job model, "
                "but this task names no application, so it launches nothing - start the job "
                "yourself, or name it: SparkSettings(application=...) or RestartSettings(task=...)"
            )
        env = dict(self.env_vars or {})
        with protocol_outcomes():  # a secret about to reach the command line is a refusal
            self._job_kafka_config(conf)
        stamp = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
        local = mode == "continuous" and deploy_mode != "cluster"  # a detached launch here
        log_path = os.path.join(self._log_dir(), f"spark-submit-{stamp}.log") if local else None
        facts: dict[str, Any] = {}
        if mode == "continuous":  # noted before it starts: a retry anywhere finds it
            facts = books.new_launch(
                context, self.application, self.launch_window_s, log_path=log_path
            )
        if mode == "available-now":
            self.log.info(
                "Running the job once (available-now) on %s; the task ends with it.", master
            )
            self.spark_hook(conf, env).submit(self.application)
            result: dict[str, Any] = {**base, "exit_code": 0}
        elif deploy_mode == "cluster":
            self.log.info(
                "Submitting the continuous job to %s (cluster mode, not waiting).", master
            )
            result = {**base, "submitted": self.spark_hook(conf, env).submit(self.application)}
        else:
            env.setdefault("PYSPARK_PYTHON", os.environ.get("PYSPARK_PYTHON", sys.executable))
            launch = self._launch_detached(conf, env, binary, secret_keys, stamp)
            result = {**base, **launch}
        if facts:
            result["launch"] = books.note_launch(context, _learned(facts, result, books))
        result = redact_doc(result, secrets)
        books.after(context, result)
        return result

    def expansion_books(self) -> SubmitBooks:
        """The submit step's books (`_protocol.steps.submit`); a standby keeps its own."""
        return SubmitBooks(self.job_name, self.expansion_id, self.coordinator,
                           self.kafka_config_id)  # fmt: skip

    def _connection(self) -> tuple[str, str, str]:
        """master, deploy mode and spark-submit binary, from the connection and the arguments."""
        conn = BaseHook.get_connection(self.spark_conn_id)
        extra = conn.extra_dejson
        master = f"{conn.host}:{conn.port}" if conn.port else str(conn.host or "yarn")
        deploy_mode = self.hook_args.get("deploy_mode") or extra.get("deploy-mode") or "client"
        binary = self.hook_args.get("spark_binary") or extra.get("spark-binary") or "spark-submit"
        return master, deploy_mode, binary

    def _launch_detached(
        self,
        conf: dict[str, Any],
        env: dict[str, Any],
        binary: str,
        secret_keys: list[str],
        stamp: str,
    ) -> dict[str, Any]:
        """``hook.submit`` with the detached launcher as Popen's executable: spark-submit's
        arguments reach it as ``"$@"``; it returns once the job runs. Its log and launch
        script are named by ``stamp``."""
        log_dir = self._log_dir()
        log_path = os.path.join(log_dir, f"spark-submit-{stamp}.log")
        launcher = detached.launcher_args(log_path, secret_keys=secret_keys)
        script = os.path.join(log_dir, f"launch-{stamp}.sh")
        quoted = " ".join(f"'{a}'" for a in [*launcher, _binary_path(binary)])
        with open(script, "w", encoding="utf-8") as handle:
            handle.write(f'#!/bin/sh\nexec {quoted} "$@"\n')
        os.chmod(script, stat.S_IRWXU)
        self.spark_hook(conf, env).submit(self.application, executable=script)
        # this worker's name for its launches (the supervisor's environment may lack it)
        handle = {**(detached.read_state(log_path + detached.STATE_SUFFIX) or {}),
                  "host": detached.this_host()}  # fmt: skip
        if "pid" not in handle:
            raise AirflowException(f"the detached launch did not start - see {log_path}")
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
                raise AirflowException(
                    f"the detached spark-submit exited with {code} within "
                    f"{self.startup_check_s:.0f} s - its log ({log_path}) ends with:\n"
                    f"{detached.tail(log_path)}"
                )
            time.sleep(0.5)
        return {"detached": True, **handle}


def _learned(facts: dict[str, Any], result: dict[str, Any], books: SubmitBooks) -> dict:
    """The launch's facts with what its start told: pid and log (on its host), the live
    processor(s) of the launched job model by now."""
    keep = ("pid", "log_path", "state_path", "started_at")
    return {
        **facts,
        **{k: result[k] for k in keep if result.get(k) is not None},
        "processors": books.processors_up(),
    }


class RestartGateOperator(BaseOperator):
    """The submit step of a chain whose restart is the user's own task (``restart_task``,
    `_protocol.restart.task`): it decides, as `SubmitStreamJobOperator` does, whether
    job model vN+1 must be started and records the step. When it must, it succeeds and the
    user's task downstream starts the job (nothing is launched from here). When it need not -
    the running application takes vN+1 itself (in place, in-app) or a processor of vN+1 runs
    already - it says why in its log and is skipped, and the user's task with it."""

    template_fields: Sequence[str] = ("job_name", "expansion_id")
    ui_color = "#ffe5b4"

    def __init__(
        self,
        *,
        job_name: str,
        expansion_id: str,
        restart_task_id: str,
        coordinator: str = DEFAULT_COORDINATOR,
        kafka_config_id: str = "kafka_default",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.job_name = job_name
        self.expansion_id = expansion_id
        self.restart_task_id = restart_task_id
        self.coordinator = coordinator
        self.kafka_config_id = kafka_config_id

    def execute(self, context: Any) -> dict[str, Any]:
        books = SubmitBooks(
            self.job_name, self.expansion_id, self.coordinator, self.kafka_config_id
        )
        skip = books.before(context, "continuous")
        if skip is not None:
            books.after(context, {**skip, "restart_task": self.restart_task_id, "launched": False})
            raise AirflowSkipException(
                f"not running the restart task {self.restart_task_id!r}: {skip.get('reason')}"
            )
        result = {"restart_task": self.restart_task_id, "launched": True}
        self.log.info(
            "Job %s can only be restarted: the restart task %r starts it on its newest job "
            "model (nothing is launched from here).",
            self.job_name,
            self.restart_task_id,
        )
        books.after(context, result)
        return result
