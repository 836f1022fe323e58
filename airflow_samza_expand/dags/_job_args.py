"""``application_args`` of the shipped PySpark job (``airflow_samza_expand/spark/job.py``), as
the DAG factory passes them to spark-submit; `airflow_samza_expand.dags` exports both. They
come as `StreamJobArgs`: a DAG given them and no application of its own is built for the
shipped job, which it then launches (no other DAG does)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any


class StreamJobArgs(list[str]):
    """The shipped job's command line, as `stream_job_args` builds it: a list that says the
    DAG is built for the shipped job (so the factory's default application is that job).
    Adding to it (``args + [...]``, ``[...] + args``) keeps the mark; ``list(args)`` drops it."""

    def __add__(self, other: Iterable[Any]) -> StreamJobArgs:  # type: ignore[override]
        return StreamJobArgs([*self, *other])

    def __radd__(self, other: Iterable[Any]) -> StreamJobArgs:
        return StreamJobArgs([*other, *self])

    def copy(self) -> StreamJobArgs:
        return StreamJobArgs(self)


def is_stream_job_args(args: Any) -> bool:
    """Whether ``args`` were built by `stream_job_args` (the shipped job's)."""
    return isinstance(args, StreamJobArgs)


def stream_job_args(
    *,
    job_name: str,
    checkpoint_dir: str,
    output_topic: str | None = None,
    bootstrap_servers: str | None = None,
    kafka_config_file: str | None = None,
    coordinator: str = "kafka",
    trigger: str = "processing-time=5s",
    consumer_group: str | None = None,
    extra: Sequence[str] = (),
) -> StreamJobArgs:
    """``application_args`` of the shipped PySpark job (``airflow_samza_expand/spark/job.py``)
    or of a job of your own on the runtime (the same flags: then name its
    ``SparkSettings(application=...)``; without one the DAG launches the shipped job).
    ``output_topic``: the shipped job needs one (it refuses to start without); a job of yours
    that writes to a table leaves it out. ``consumer_group``: the group the job commits to
    (default the job name)."""
    args = ["--job-name", job_name, "--coordinator", coordinator]
    if bootstrap_servers:
        args += ["--bootstrap-servers", bootstrap_servers]
    if kafka_config_file:
        args += ["--kafka-config", kafka_config_file]
    args += ["--checkpoint-dir", checkpoint_dir]
    if output_topic:
        args += ["--output-topic", output_topic]
    args += ["--trigger", trigger]
    if consumer_group:
        args += ["--consumer-group", consumer_group]
    args += [*extra]
    return StreamJobArgs(args)


def stream_job_args_from_env(job_name: str) -> StreamJobArgs:
    """`stream_job_args` from the example DAGs' environment: ``SAMZA_EXPAND_BOOTSTRAP_SERVERS``
    (default ``localhost:9092``), ``SAMZA_EXPAND_CHECKPOINT_ROOT`` (the checkpoint is
    ``<root>/<job name>``) and ``SAMZA_EXPAND_OUTPUT_TOPIC``."""
    root = os.environ.get("SAMZA_EXPAND_CHECKPOINT_ROOT", "/tmp/samza-expand/checkpoints")
    return stream_job_args(
        job_name=job_name,
        bootstrap_servers=os.environ.get("SAMZA_EXPAND_BOOTSTRAP_SERVERS", "localhost:9092"),
        checkpoint_dir=os.path.join(root, job_name),
        output_topic=os.environ.get("SAMZA_EXPAND_OUTPUT_TOPIC", "samza-expand-output"),
    )


__all__ = ["StreamJobArgs", "is_stream_job_args", "stream_job_args", "stream_job_args_from_env"]
