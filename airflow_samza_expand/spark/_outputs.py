"""Executor-side output of the job: produce processor outputs to Kafka, count per task."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

SUMMARY_SCHEMA = "task string, records long, outputs long"


def produce_outputs(
    kafka_options: Mapping[str, str], topic: str
) -> Any:  # returns the mapInArrow function
    """Executor function: produce processor outputs, yield per-task (records, outputs)."""

    def produce(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        from airflow_samza_expand._kafka.clients import Producer
        from airflow_samza_expand.spark._source import kafka_client_config

        config = kafka_client_config(kafka_options)
        config.setdefault("linger.ms", "5")
        producer = Producer(config)
        errors: list[str] = []

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(str(err))

        per_task: dict[str, list[int]] = {}
        for batch in batches:
            cols = batch.to_pydict()
            for task, key, records, value in zip(
                cols["task"], cols["key"], cols["records"], cols["value"], strict=True
            ):
                counts = per_task.setdefault(task, [0, 0])
                counts[0] += records or 0
                if value is None:
                    continue
                counts[1] += 1
                while True:
                    try:
                        producer.produce(
                            topic,
                            value=value.encode("utf-8"),
                            key=None if key is None else key.encode("utf-8"),
                            on_delivery=on_delivery,
                        )
                        break
                    except BufferError:
                        producer.poll(0.1)
                producer.poll(0)
        remaining = producer.flush(60)
        if remaining or errors:
            raise RuntimeError(
                f"producing to {topic!r} failed ({remaining} undelivered): {errors[:3]} - "
                "check the output topic exists and the brokers are reachable"
            )
        tasks = sorted(per_task)
        yield pa.RecordBatch.from_pydict(
            {
                "task": tasks,
                "records": [per_task[t][0] for t in tasks],
                "outputs": [per_task[t][1] for t in tasks],
            },
            schema=pa.schema(
                [("task", pa.string()), ("records", pa.int64()), ("outputs", pa.int64())]
            ),
        )

    return produce


def progress_summary(report: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a StreamingQueryProgress worth keeping per batch."""
    return {
        "batchId": report["batchId"],
        "timestamp": report["timestamp"],
        "numInputRows": report["numInputRows"],
        "durationMs": dict(report["durationMs"]),
        "stateRows": [op["numRowsTotal"] for op in report["stateOperators"]],
    }
