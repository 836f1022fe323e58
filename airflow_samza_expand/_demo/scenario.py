"""The end-to-end scenario shared by ``samza-expand demo`` and tests/e2e: a keyed producer runs
the whole time, the stateful PySpark job runs on job model v1 (2 partitions), the expansion DAG
grows the topic 2 -> 4 -> 8, and the verifier checks exact per-key counts and order.

Airflow must already point at its home (``_demo.airflow_home.prepare`` or the tests'
``airflow_env``) with ``kafka_default`` and ``spark_default`` set; ``run_dag`` runs one DAG.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_samza_expand._demo.jobs import (
    StreamJob,
    caught_up,
    committed_total,
    job_args,
    measure_restart,
    running_processors,
    spark_env,
    stop_job,
    wait_for,
)
from airflow_samza_expand._demo.producer import KeyedProducer, start_scenario_producer
from airflow_samza_expand._demo.scenario_config import (
    MID_BARRIER,
    ExpansionOutcome,
    ScenarioConfig,
    application_conf,
    dag_settings,
    env_problems,
)
from airflow_samza_expand._demo.scenario_dag import DagRuns
from airflow_samza_expand._demo.verify import Verification, verify, wait_for_outputs

if TYPE_CHECKING:
    from airflow_samza_expand.store import CoordinatorStore


class Scenario(DagRuns):
    """One job, its topics, producer and expansions (see the module docstring)."""

    def __init__(
        self,
        cfg: ScenarioConfig,
        *,
        run_dag: Callable[..., Any],
        task_states: Callable[[Any], dict[str, str]],
        xcom: Callable[..., Any],
        log: Callable[[str], None] = print,
    ) -> None:
        from airflow_samza_expand._kafka.admin import KafkaAdmin
        from airflow_samza_expand._kafka.config import client_config

        self.cfg = cfg
        self.run_dag, self.task_states, self.xcom, self.log = run_dag, task_states, xcom, log
        self.config = client_config(cfg.bootstrap)
        self.admin = KafkaAdmin(self.config, timeout_s=30)
        self.job_name = cfg.name
        self.topic = f"{cfg.name}-orders"
        self.other_topic = f"{cfg.name}-payments" if cfg.second_stream else None
        self.output_topic = f"{cfg.name}-counts"
        self.checkpoint = str(cfg.work_dir / "checkpoint")
        self.log_dir = str(cfg.work_dir / "logs")
        self.store: CoordinatorStore | None = None
        self.producer: KeyedProducer | None = None
        self.other_producer: KeyedProducer | None = None
        self.job: StreamJob | None = None
        self.outcomes: list[ExpansionOutcome] = []
        self.plain_restart_s: float | None = None
        self.latencies: list[Any] = []  # demo.latency.moved_key_latencies, set by the demo
        self.interrupted_states: dict[str, dict[str, str]] = {}  # per interruption point
        self.models: list[Any] = []

    # -- setup ---------------------------------------------------------------------------------

    def args(self, trigger: str | None = None) -> list[str]:
        if trigger is None:
            trigger = "available-now" if self.cfg.run_mode == "available-now" else self.cfg.trigger
        extra = ["--allow-task-change"] if self.cfg.naive else []
        extra += list(self.cfg.application_args)
        return job_args(
            job_name=self.job_name,
            bootstrap=self.cfg.bootstrap,
            checkpoint_dir=self.checkpoint,
            output_topic=self.output_topic,
            trigger=trigger,
            extra=extra,
        )

    def setup(self) -> None:
        from airflow_samza_expand.core.model import JobModel
        from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

        for topic in self.input_topics:
            self.admin.ensure_topic(topic, 2)
        self.admin.ensure_topic(self.output_topic, 1)
        self.store = KafkaCoordinatorStore(self.config, self.job_name)
        self.store.write_job_model(
            JobModel.initial(self.job_name, dict.fromkeys(self.input_topics, 2))
        )
        self.job = self._stream_job(self.args())
        self.log(
            f"job {self.job_name}: input {', '.join(self.input_topics)} (2 partitions each), "
            f"output {self.output_topic}, job model v1 written"
        )

    def _stream_job(self, args: list[str]) -> StreamJob:
        own = {"application": self.cfg.application} if self.cfg.application else {}
        return StreamJob(self.job_name, args, self.log_dir, master=self.cfg.master,
                         conf=application_conf(self.cfg), **own)  # fmt: skip

    @property
    def input_topics(self) -> list[str]:
        """The streams the job reads: the one the expansions grow, then the one that stays."""
        return [self.topic] + ([self.other_topic] if self.other_topic else [])

    def produced(self) -> dict[str, int]:
        """Records acknowledged per key, over every input stream (a key may be on both)."""
        counts = dict(self.producer.snapshot()) if self.producer is not None else {}
        if self.other_producer is not None:
            for key, n in self.other_producer.snapshot().items():
                counts[key] = counts.get(key, 0) + n
        return counts

    def caught_up(self) -> bool:
        return all(caught_up(self.admin, self.job_name, t) for t in self.input_topics)

    def start_producer(self) -> None:
        self.producer = start_scenario_producer(self.config, self.topic, self.cfg)
        if self.other_topic is not None:
            # payments of the same keys as the orders (a join's two sides), at half their
            # rate: a key's payment n is sent well after its order n, so each one has its order
            self.other_producer = start_scenario_producer(
                self.config, self.other_topic, self.cfg, rate=self.cfg.rate / 2
            )
        self.log(
            f"producer: {self.cfg.keys} keys, {self.cfg.rate:.0f} records/s, librdkafka "
            f"default partitioner, metadata refresh {self.cfg.refresh_ms} ms"
        )

    def run_once(self, what: str) -> None:
        """One available-now run of the job (blocking): processes what is there and ends."""
        assert self.job is not None
        cmd = self._stream_job(self.args("available-now")).command()
        log_path = Path(self.log_dir) / f"{what}-{time.strftime('%H%M%S')}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "wb") as out:
            code = subprocess.run(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=spark_env(), timeout=900
            ).returncode
        if code != 0:
            raise RuntimeError(f"{what}: the job exited with {code}; log {log_path}")

    def start_job(self) -> None:
        """Continuous: launch on v1 and wait for its first committed batch. Available-now: one
        run."""
        assert self.job is not None
        if self.cfg.run_mode == "available-now":
            self.run_once("first-run")
            self.log("job: first available-now run on v1 done")
            return
        self.job.launch()
        wait_for(
            "the job to run job model v1",
            lambda: running_processors(self.store, 1),
            timeout_s=300,
            log=self.log,
        )
        wait_for(
            "the job's first committed batch",
            lambda: committed_total(self.admin, self.job_name, self.topic) > 0,
            timeout_s=300,
            log=self.log,
        )
        self.log(f"job: running on job model v1 (pid {self.job.handle['pid']})")

    def measure_plain_restart(self) -> float:
        assert self.job is not None
        self.plain_restart_s = measure_restart(
            self.job, self.store, self.admin, topic=self.topic, version=1, log=self.log
        )
        self.log(f"plain restart (stop -> first committed batch): {self.plain_restart_s:.1f}s")
        return self.plain_restart_s

    # -- the end -------------------------------------------------------------------------------

    def finish(self, expected_versions: list[int] | None = None) -> Verification:
        """Stop the producer, let the job process everything, stop it, verify."""
        assert self.producer is not None and self.job is not None
        self.producer.stop()
        if self.other_producer is not None:
            self.other_producer.stop()
        produced = self.produced()
        self.log(f"producer stopped: {sum(produced.values())} records acknowledged")
        if self.cfg.run_mode == "available-now":
            self.run_once("final-run")
        else:
            wait_for(
                "the job to process every produced record",
                self.caught_up,
                timeout_s=300,
                log=self.log,
            )
            version = self.store.latest_job_model().version
            if running_processors(self.store, version):
                stop_job(self.store, version, log=self.log)
        self.job.terminate()
        result = verify(
            self.config,
            job_name=self.job_name,
            input_topic=self.topic,
            other_inputs=self.input_topics[1:],
            output_topic=self.output_topic,
            produced=produced,
            store=self.store,
            expected_versions=expected_versions,
            joins=self._joins(),
        )
        self.models = self.store.job_model_history()
        return result

    def _joins(self) -> tuple[dict[str, int], dict[str, int]] | None:
        """Two streams: the records per key of orders and of payments, for the join check."""
        if self.other_topic is None or self.other_producer is None:
            return None
        return self.producer.snapshot(), self.other_producer.snapshot()

    def verify_at_quiet_point(self, expected_versions: list[int] | None = None) -> Verification:
        """Continuous mode, job and producer keep running: pause the producer, wait until the
        job processed everything, verify exactly, resume the producer."""
        assert self.producer is not None
        self.producer.pause()
        try:
            wait_for(
                "the job to process every produced record",
                self.caught_up,
                timeout_s=300,
                log=self.log,
            )
            wait_for_outputs(self.config, self.output_topic, self.producer.snapshot(),
                             log=self.log)  # fmt: skip
            return verify(
                self.config,
                job_name=self.job_name,
                input_topic=self.topic,
                output_topic=self.output_topic,
                produced=self.producer.snapshot(),
                store=self.store,
                expected_versions=expected_versions,
            )
        finally:
            self.producer.resume()

    def close(self) -> None:
        for producer in (self.producer, self.other_producer):
            if producer is None:
                continue
            try:
                producer.stop()
            except Exception as exc:  # noqa: BLE001 - closing must not mask the outcome
                self.log(f"producer stop: {exc}")
        if self.job is not None:
            self.job.terminate()
        if self.store is not None:
            self.store.close()
        self.admin.close()


__all__ = ["MID_BARRIER", "ExpansionOutcome", "Scenario", "ScenarioConfig", "dag_settings",
           "env_problems"]  # fmt: skip
