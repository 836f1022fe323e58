"""Several stateful jobs reading one topic, expanded by one DAG run (factory ``jobs=[...]``).

Each job has its own name (so its own consumer group and coordinator topic), keyed processor,
output topic, checkpoint and logs; one keyed producer writes the shared 2-partition topic the
whole time. The jobs run continuously (``cfg.run_mode`` is not used). `expand` runs the
multi-job DAG once (the topic is grown once, each job restarted on its own vN+1); `finish`
checks every job's outputs exactly (`_demo.verify`).

Used by tests/e2e/test_e2e_multi_job.py; Airflow must already point at its home with the
``kafka_default`` and ``spark_default`` connections (as for `_demo.scenario.Scenario`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_samza_expand._demo.jobs import (
    StreamJob,
    caught_up,
    committed_total,
    job_args,
    running_processors,
    stop_job,
    wait_for,
)
from airflow_samza_expand._demo.producer import KeyedProducer, start_scenario_producer
from airflow_samza_expand._demo.scenario_config import ScenarioConfig, dag_settings
from airflow_samza_expand._demo.verify import Verification, verify

if TYPE_CHECKING:
    from airflow_samza_expand.store import CoordinatorStore


@dataclass
class JobSide:
    """One job of the scenario."""

    name: str
    processor: str
    output_topic: str
    checkpoint: str
    log_dir: str
    store: CoordinatorStore
    job: StreamJob


@dataclass
class MultiOutcome:
    state: str
    tasks: dict[str, str]
    jobs: dict[str, Any]  # JobsReportOperator's {job: outcome row}
    plans: dict[str, Any]  # each job's plan XCom


class MultiJobScenario:
    """Jobs (one per processor path) on one topic, a producer, one multi-job expansion."""

    def __init__(
        self,
        cfg: ScenarioConfig,
        processors: Sequence[str],
        *,
        run_dag: Callable[..., Any],
        task_states: Callable[[Any], dict[str, str]],
        xcom: Callable[..., Any],
        log: Callable[[str], None] = print,
    ) -> None:
        from airflow_samza_expand._kafka.admin import KafkaAdmin
        from airflow_samza_expand._kafka.config import client_config

        self.cfg, self.processors = cfg, list(processors)
        self.run_dag, self.task_states, self.xcom, self.log = run_dag, task_states, xcom, log
        self.config = client_config(cfg.bootstrap)
        self.admin = KafkaAdmin(self.config, timeout_s=30)
        self.topic = f"{cfg.name}-orders"
        self.sides: list[JobSide] = []
        self.producer: KeyedProducer | None = None

    def args(self, side: JobSide) -> list[str]:
        return job_args(
            job_name=side.name,
            bootstrap=self.cfg.bootstrap,
            checkpoint_dir=side.checkpoint,
            output_topic=side.output_topic,
            trigger="processing-time=500ms",
            extra=["--processor", side.processor],
        )

    def setup(self) -> None:
        from airflow_samza_expand.core.model import JobModel
        from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

        self.admin.ensure_topic(self.topic, 2)
        for i, processor in enumerate(self.processors):
            name = f"{self.cfg.name}-{chr(ord('a') + i)}"
            work = self.cfg.work_dir / name
            side = JobSide(
                name=name,
                processor=processor,
                output_topic=f"{name}-out",
                checkpoint=str(work / "checkpoint"),
                log_dir=str(work / "logs"),
                store=KafkaCoordinatorStore(self.config, name),
                job=StreamJob(name, [], str(work / "logs"), master=self.cfg.master),
            )
            side.job.args = self.args(side)
            self.admin.ensure_topic(side.output_topic, 1)
            side.store.write_job_model(JobModel.initial(name, {self.topic: 2}))
            self.sides.append(side)
            self.log(f"job {name}: processor {processor}, output {side.output_topic}, v1 written")

    def start_producer(self) -> None:
        self.producer = start_scenario_producer(self.config, self.topic, self.cfg)

    def start_jobs(self) -> None:
        """Launch every job on v1 (at once), then wait for each one's first committed batch."""
        for side in self.sides:
            side.job.launch()
        for side in self.sides:
            wait_for(f"{side.name} to run job model v1",
                     lambda s=side: running_processors(s.store, 1), timeout_s=300,
                     log=self.log)  # fmt: skip
            wait_for(f"{side.name}'s first committed batch",
                     lambda s=side: committed_total(self.admin, s.name, self.topic) > 0,
                     timeout_s=300, log=self.log)  # fmt: skip
        self.log(f"jobs running on v1: {', '.join(s.name for s in self.sides)}")

    def build_dag(self, dag_id: str) -> Any:
        from airflow_samza_expand.dags import build_expansion_dag

        job = {
            "jobs": [s.name for s in self.sides],
            "per_job": {s.name: {"job": {"application_args": self.args(s)}} for s in self.sides},
            "topics": [self.topic],
            "run_mode": "continuous",
        }
        log_dir = str(self.cfg.work_dir / "dag-logs")
        return build_expansion_dag(dag_id, dag_settings(self.cfg, job, log_dir))

    def expand(self) -> MultiOutcome:
        """One run of the multi-job DAG; the jobs are then the ones its submit steps launched."""
        when = datetime.now(UTC)
        dag = self.build_dag(f"samza_expand_multi_{self.cfg.name.replace('-', '_')}")
        run = self.run_dag(dag, logical_date=when, run_after=when)
        plans = {}
        for side in self.sides:
            group = side.name.replace(".", "_")
            submit = self.xcom(run, f"{group}.submit")
            if isinstance(submit, dict) and "pgid" in submit:
                side.job.handle = dict(submit)
            plans[side.name] = self.xcom(run, f"{group}.plan")
        report = self.xcom(run, "report") or {}
        return MultiOutcome(str(run.state), self.task_states(run), report.get("jobs", {}), plans)

    def finish(self, expected_versions: list[int] | None = None) -> dict[str, Verification]:
        """Stop the producer; let each job process everything, stop it and verify it."""
        assert self.producer is not None
        self.producer.stop()
        produced = self.producer.snapshot()
        self.log(f"producer stopped: {sum(produced.values())} records acknowledged")
        results = {}
        for side in self.sides:
            wait_for(f"{side.name} to process every produced record",
                     lambda s=side: caught_up(self.admin, s.name, self.topic), timeout_s=300,
                     log=self.log)  # fmt: skip
            version = side.store.latest_job_model().version
            if running_processors(side.store, version):
                stop_job(side.store, version, log=self.log)
            side.job.terminate()
            results[side.name] = verify(
                self.config,
                job_name=side.name,
                input_topic=self.topic,
                output_topic=side.output_topic,
                produced=produced,
                store=side.store,
                expected_versions=expected_versions,
            )
        return results

    def close(self) -> None:
        if self.producer is not None:
            try:
                self.producer.stop()
            except Exception as exc:  # noqa: BLE001 - closing must not mask the outcome
                self.log(f"producer stop: {exc}")
        for side in self.sides:
            side.job.terminate()
            side.store.close()
        self.admin.close()


__all__ = ["JobSide", "MultiJobScenario", "MultiOutcome"]
