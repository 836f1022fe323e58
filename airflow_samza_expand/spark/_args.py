"""Command line of the job (``python -m airflow_samza_expand.spark.job --help``)."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_samza_expand.core._liveness import DEFAULT_TTL_S
from airflow_samza_expand.core.model import JobModel

DEFAULT_MAX_RECORDS_PER_BATCH = 100_000
_PROCESSING_TIME = re.compile(r"^processing-time=(\d+(?:\.\d+)?)\s*(ms|s|m)?$")


class UsageError(Exception):
    """Bad input: the message names the problem and the fix."""


def add_runtime_arguments(p: argparse.ArgumentParser) -> None:
    """The options of every job on the runtime (``spark.runtime``): what the DAG passes."""
    p.add_argument("--job-name", required=True, help="job name (the default consumer group)")
    p.add_argument(
        "--consumer-group",
        default=None,
        metavar="GROUP",
        help="the Kafka consumer group the job commits its processed offsets to (the barrier "
        "reads it) and, on a fresh checkpoint, starts each partition from (its log start where "
        "the group has committed nothing); default: the job name. Give the group an existing "
        "job used to move it onto the runtime without reading again what it processed",
    )
    p.add_argument("--bootstrap-servers", help="Kafka bootstrap servers host:port[,...]")
    p.add_argument("--kafka-config", metavar="FILE", help="librdkafka key=value config file")
    p.add_argument(
        "--coordinator",
        default="kafka",
        help="coordinator store: 'kafka', 'kafka://<topic>', a path or an fsspec URL",
    )
    p.add_argument("--checkpoint-dir", required=True, help="Spark checkpoint directory")
    p.add_argument("--output-topic", default=None, help="topic the job's outputs go to")
    p.add_argument(
        "--trigger",
        default="processing-time=5s",
        help="'available-now' or 'processing-time=<n>[ms|s|m]' (default processing-time=5s)",
    )
    p.add_argument("--processor-id", default=None, help="heartbeat id (default host-pid)")
    p.add_argument(
        "--max-records-per-batch",
        type=int,
        default=DEFAULT_MAX_RECORDS_PER_BATCH,
        help=f"cap of records per micro-batch, shared fairly by SSPs; 0 = no cap "
        f"(default {DEFAULT_MAX_RECORDS_PER_BATCH})",
    )
    p.add_argument(
        "--progress-file",
        default=None,
        metavar="FILE",
        help="append each batch's Spark progress (durations, rows) as a JSON line",
    )
    p.add_argument(
        "--standby",
        action="store_true",
        help="start as a hot standby: warm Spark up and wait for the active lease "
        "(without it the job still waits while another processor holds the lease)",
    )
    p.add_argument(
        "--job-model-version",
        type=int,
        default=0,
        help="never process a job model older than this (a standby launched for vN+1 waits "
        "for it); default 0 = the newest",
    )
    p.add_argument(
        "--ttl",
        type=float,
        default=DEFAULT_TTL_S,
        help=f"liveness TTL in seconds: heartbeat TTL and lease session timeout "
        f"(default {DEFAULT_TTL_S:g}; Kafka allows 6-1800)",
    )
    p.add_argument(
        "--no-lease",
        action="store_true",
        help="do not take the job's active lease (a single instance only)",
    )
    from airflow_samza_expand.spark._stale import add_arguments

    add_arguments(p)  # --barrier-offsets, --partitioner, --on-stale-placement


def build_runtime_parser() -> argparse.ArgumentParser:
    """Command line of a job on the runtime (``runtime.attach``; unknown options are the job's)."""
    p = argparse.ArgumentParser(
        prog="<your job>", description="A PySpark job on airflow_samza_expand.spark.runtime."
    )
    add_runtime_arguments(p)
    return p


def build_parser() -> argparse.ArgumentParser:
    from airflow_samza_expand.spark._processor import DEFAULT_PROCESSOR

    p = argparse.ArgumentParser(
        prog="python -m airflow_samza_expand.spark.job",
        description="Stateful PySpark job reading Kafka by the tasks of its Samza-style job model.",
    )
    add_runtime_arguments(p)
    p.add_argument(
        "--processor",
        default=DEFAULT_PROCESSOR,
        help=f"keyed processor as module:Class (default {DEFAULT_PROCESSOR})",
    )
    p.add_argument(
        "--allow-task-change",
        action="store_true",
        help="accept a checkpoint written under another task set (keyed state may be lost)",
    )
    p.add_argument(
        "--master", default=None, help="Spark master when not run by spark-submit (local[2])"
    )
    p.add_argument(
        "--shuffle-partitions",
        type=int,
        default=4,
        help="state partitions of a new checkpoint (fixed once the checkpoint exists)",
    )
    p.add_argument(
        "--state-buckets",
        type=int,
        default=0,
        help="0: one Spark state row per (task, key); N: per (task, hash(key) %% N) holding "
        "its keys' states - far fewer Python calls per batch (fixed once the checkpoint exists)",
    )
    p.add_argument(
        "--state-shards",
        type=int,
        default=0,
        help="N: state in N Spark groups, each holding the states of the (task, key) pairs "
        "hashed to it - at most N Python calls per batch however many tasks and keys (fixed "
        "once the checkpoint exists; not with --state-buckets)",
    )
    p.add_argument(
        "--max-read-splits",
        type=int,
        default=0,
        help="most read tasks a batch (0: one per Kafka partition, the default; cap it for "
        "very many small partitions)",
    )
    p.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark setting (repeatable) when run without spark-submit",
    )
    return p


def parse_trigger(text: str) -> dict[str, Any]:
    """``available-now`` -> {availableNow: True}; ``processing-time=5s`` -> {processingTime}."""
    if text == "available-now":
        return {"availableNow": True}
    match = _PROCESSING_TIME.match(text.strip())
    if not match:
        raise UsageError(
            f"trigger {text!r} is not understood - give 'available-now' or "
            "'processing-time=5s' (units ms, s, m)"
        )
    amount, unit = match.group(1), match.group(2) or "s"
    words = {"ms": "milliseconds", "s": "seconds", "m": "minutes"}
    return {"processingTime": f"{amount} {words[unit]}"}


def validate_runtime_args(args: argparse.Namespace) -> None:
    """UsageError naming the fix for a bad runtime option."""
    if not args.bootstrap_servers and not args.kafka_config:
        raise UsageError("no Kafka given - pass --bootstrap-servers or --kafka-config FILE")
    if args.kafka_config and not os.path.isfile(args.kafka_config):
        raise UsageError(
            f"--kafka-config {args.kafka_config!r} is not a file - give a readable file"
        )
    if args.max_records_per_batch < 0:
        raise UsageError("--max-records-per-batch must be >= 0 (0 means no cap)")
    if args.ttl < 1:
        raise UsageError("--ttl must be >= 1 s (Kafka's minimum session timeout is 6 s)")
    if args.job_model_version < 0:
        raise UsageError("--job-model-version must be >= 0 (0 means the newest)")
    if args.standby and args.no_lease:
        raise UsageError("--standby needs the active lease - drop --no-lease")
    group = getattr(args, "consumer_group", None)
    if group is not None and (not group.strip() or group != group.strip()):
        raise UsageError(
            f"--consumer-group {group!r} is not a group name - give the name without spaces "
            "around it, or leave it out (the job name)"
        )
    from airflow_samza_expand._kafka.membership import lease_group

    if group is not None and group == lease_group(args.job_name):
        raise UsageError(
            f"--consumer-group {group!r} is the job's lease group (its members hold the active "
            "lease; offsets cannot be committed into it) - give the group the job's offsets "
            "belong to, or leave it out"
        )
    parse_trigger(args.trigger)


def validate_args(args: argparse.Namespace) -> None:
    validate_runtime_args(args)
    if not args.output_topic:
        raise UsageError("no output topic - pass --output-topic")
    if args.state_buckets < 0:
        raise UsageError("--state-buckets must be >= 0 (0 means one state row per key)")
    if args.state_shards < 0:
        raise UsageError("--state-shards must be >= 0 (0 means no shards)")
    if args.state_buckets and args.state_shards:
        raise UsageError(
            "--state-buckets and --state-shards are two state layouts - give one of them"
        )
    if args.shuffle_partitions <= 0:
        raise UsageError("--shuffle-partitions must be >= 1")
    if args.max_read_splits < 0:
        raise UsageError("--max-read-splits must be >= 0 (0 means one read task per partition)")
    for item in args.spark_conf:
        if "=" not in item:
            raise UsageError(f"--spark-conf {item!r} is not KEY=VALUE")
    from airflow_samza_expand.spark._processor import load_processor

    try:
        load_processor(args.processor)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def assignment(model: JobModel) -> dict[str, list[int]]:
    """Spark's ``assign``: ``{topic: [partition, ...]}`` of every SSP of the job model."""
    return {t: list(range(n)) for t, n in sorted(model.partition_counts().items())}


def task_of(model: JobModel) -> dict[str, str]:
    """``"topic:partition" -> task`` (a broadcast SSP, read by every task, is refused)."""
    if model.broadcast_ssps:
        raise UsageError(
            f"job model v{model.version} has broadcast SSPs - read it with "
            "read_kafka(source='python')"
        )
    return {
        f"{s.stream}:{s.partition}": task
        for task, ssps in model.task_to_ssps().items()
        for s in ssps
    }


def parse_args(argv: Sequence[str] | None, overrides: Mapping[str, Any]) -> tuple[Any, list[str]]:
    """(runtime settings, the job's own options); keywords win over the command line."""
    parser = build_runtime_parser()
    known = {a.dest for a in parser._actions}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise TypeError(f"attach() got unknown settings {unknown}; known: {sorted(known)}")
    for action in parser._actions:
        if action.dest in overrides:
            action.required = False
    args, extra = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    for key, value in overrides.items():
        setattr(args, key, value)
    return args, extra
