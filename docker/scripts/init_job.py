"""Prepare the demo job on the stack's Kafka: input and output topics, job model v1.

Idempotent: existing topics are kept and an existing job model is left alone (the newest version
stays in force), so `docker compose up` can run it every time. Settings come from the
environment (see docker/compose.yaml): KAFKA_BOOTSTRAP_SERVERS, JOB_NAME, INPUT_TOPIC,
INPUT_PARTITIONS, OUTPUT_TOPIC.
"""

from __future__ import annotations

import logging
import os
import sys
import time

from airflow_samza_expand._kafka.admin import KafkaAdmin, KafkaUnavailableError
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

log = logging.getLogger("init_job")


def wait_for_kafka(config: dict[str, str], timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with KafkaAdmin(config, timeout_s=10) as admin:
                admin.topic_names()
            return
        except KafkaUnavailableError as exc:
            if time.monotonic() > deadline:
                raise
            log.info("waiting for Kafka at %s: %s", config["bootstrap.servers"], exc)
            time.sleep(3)


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "kafka:9092")
    job_name = os.environ.get("JOB_NAME", "orders-counter")
    input_topic = os.environ.get("INPUT_TOPIC", "orders")
    output_topic = os.environ.get("OUTPUT_TOPIC", "orders-counts")
    try:
        partitions = int(os.environ.get("INPUT_PARTITIONS", "2"))
    except ValueError:
        print("error: INPUT_PARTITIONS must be an integer, e.g. 2", file=sys.stderr)
        return 2
    config = client_config(bootstrap)
    wait_for_kafka(config)
    with KafkaAdmin(config, timeout_s=30) as admin:
        created = admin.ensure_topic(input_topic, partitions)
        admin.ensure_topic(output_topic, 1)
        counts = admin.partition_counts([input_topic])
    log.info(
        "input topic %s: %d partitions (%s)",
        input_topic,
        counts[input_topic],
        "created" if created else "already there",
    )
    with KafkaCoordinatorStore(config, job_name) as store:
        latest = store.latest_job_model()
        if latest is not None:
            log.info(
                "job %s already has job model v%d (%s): left as it is",
                job_name,
                latest.version,
                latest.partition_counts(),
            )
            return 0
        model = store.write_job_model(
            JobModel.initial(
                job_name, {input_topic: counts[input_topic]}, created_by="docker/init_job"
            )
        )
        log.info(
            "wrote job model v%d of %s to %s: tasks %s",
            model.version,
            job_name,
            store.topic,
            {t: sorted(str(s) for s in ssps) for t, ssps in model.task_to_ssps().items()},
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
