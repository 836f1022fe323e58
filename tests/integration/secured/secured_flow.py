"""The Kafka side of the PySpark job under its own principal (for the Kafka-layer flow test):
assign the job model's partitions, commit the group `<job>` after each poll, write counts to
the output topic, heartbeat, stop on a stop request for its version. The real job runs in
test_secured_e2e.py."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from airflow_samza_expand.store._kafka import KafkaCoordinatorStore


class JobKafkaActions(threading.Thread):
    def __init__(self, config: Mapping[str, str], job: str, output: str) -> None:
        super().__init__(daemon=True, name=f"job-{job}")
        self.config, self.job, self.output = dict(config), job, output
        self.errors: list[str] = []
        self.version: int | None = None
        self.consumed = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        store = KafkaCoordinatorStore(self.config, self.job)
        consumer = Consumer(
            {**self.config, "group.id": self.job, "enable.auto.commit": "false",
             "auto.offset.reset": "earliest"}
        )  # fmt: skip
        producer = Producer(self.config)
        try:
            model = store.latest_job_model()
            assert model is not None
            self.version = model.version
            ssps = sorted((ssp.stream, ssp.partition) for ssp in model.ssp_to_task)
            committed = consumer.committed([TopicPartition(t, p) for t, p in ssps], timeout=30)
            consumer.assign([TopicPartition(tp.topic, tp.partition, max(tp.offset, 0))
                             for tp in committed])  # fmt: skip
            while True:
                store.heartbeat(f"p-{self.job}-v{model.version}", model.version, "running")
                stop = store.stop_request()
                if stop and int(stop["version"]) >= model.version:
                    break
                messages = consumer.consume(500, timeout=0.3)
                good = [m for m in messages if m.error() is None]
                for m in messages:
                    if m.error() is not None and m.error().code() != KafkaError._PARTITION_EOF:
                        self.errors.append(m.error().str())
                if good:
                    self.consumed += len(good)
                    producer.produce(self.output, key=b"count", value=str(self.consumed).encode())
                    producer.flush(30)
                    consumer.commit(asynchronous=False)
            store.heartbeat(f"p-{self.job}-v{model.version}", model.version, "stopped")
        except Exception as exc:  # noqa: BLE001 - reported to the test
            self.errors.append(repr(exc))
        finally:
            consumer.close()
            store.close()
            self.stopped.set()
