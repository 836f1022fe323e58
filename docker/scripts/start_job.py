"""Start the stateful PySpark job on the Spark master, unless an instance already runs.

Runs in the `stream-job` service: `docker compose up` may start it again after the expansion DAG
has restarted the job from Airflow, and two drivers on one checkpoint must never run together.
So it first reads the job's processors from the coordinator topic; if one heartbeat
`starting`/`running` within HEARTBEAT_FRESH_S (default 60 s; the job heartbeats every 10 s
when idle), it logs which one and exits 0. Otherwise it replaces itself with spark-submit.
"""

from __future__ import annotations

import logging
import os
import sys
from datetime import UTC, datetime

import airflow_samza_expand
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

log = logging.getLogger("start_job")
ACTIVE = {"starting", "running", "stopping"}


def fresh_processors(processors: dict[str, dict], fresh_s: float) -> dict[str, dict]:
    """Processors that heartbeat an active state within `fresh_s` seconds."""
    now = datetime.now(UTC)
    found = {}
    for pid, record in processors.items():
        if record.get("state") not in ACTIVE:
            continue
        try:
            at = datetime.fromisoformat(str(record.get("heartbeat_at")).replace("Z", "+00:00"))
        except ValueError:
            continue
        if (now - at).total_seconds() <= fresh_s:
            found[pid] = record
    return found


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    env = os.environ
    job_name = env.get("JOB_NAME", "orders-counter")
    bootstrap = env.get("KAFKA_BOOTSTRAP_SERVERS", "kafka:9092")
    fresh_s = float(env.get("HEARTBEAT_FRESH_S", "60"))
    with KafkaCoordinatorStore(client_config(bootstrap), job_name) as store:
        model = store.latest_job_model()
        running = fresh_processors(store.processors(), fresh_s)
    if model is None:
        print(
            f"error: job {job_name!r} has no job model - run the job-init service first",
            file=sys.stderr,
        )
        return 2
    if running:
        log.info(
            "job %s already runs (%s): not starting a second instance on the same checkpoint",
            job_name,
            ", ".join(
                f"{pid} {r.get('state')} v{r.get('job_model_version')}"
                for pid, r in sorted(running.items())
            ),
        )
        return 0
    package_dir = os.path.dirname(os.path.abspath(airflow_samza_expand.__file__))
    application = os.path.join(package_dir, "spark", "job.py")
    argv = [
        "spark-submit",
        "--master",
        env.get("SPARK_MASTER_URL", "spark://spark-master:7077"),
        "--deploy-mode",
        "client",
        "--name",
        f"samza-expand-{job_name}",
        application,
        "--job-name",
        job_name,
        "--bootstrap-servers",
        bootstrap,
        "--checkpoint-dir",
        os.path.join(env.get("CHECKPOINT_ROOT", "/checkpoints"), job_name),
        "--output-topic",
        env.get("OUTPUT_TOPIC", "orders-counts"),
        "--trigger",
        env.get("JOB_TRIGGER", "processing-time=5s"),
        "--processor-id",
        env.get("PROCESSOR_ID", "stream-job"),
    ]
    log.info("starting job %s on job model v%d: %s", job_name, model.version, " ".join(argv))
    sys.stdout.flush()
    os.execvp(argv[0], argv)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
