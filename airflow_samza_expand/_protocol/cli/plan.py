"""`samza-expand plan`: print the expansion plan of a job model (no cluster needed).

samza-expand plan --job-model job_model.json --target orders=8
samza-expand plan --partitions orders=2 --grouper GroupByPartitionFixedTasks --target orders=4
samza-expand plan --job-model job_model.json --target orders=8 --json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from airflow_samza_expand.core._names import coordinator_topic
from airflow_samza_expand.core._plan import DEFAULT_MAX_PARTITIONS, plan_expansion
from airflow_samza_expand.core._render import render_plan
from airflow_samza_expand.core.errors import ExpansionError, MaxPartitionsError
from airflow_samza_expand.core.expansion import DEFAULT_ALGORITHM_PATH
from airflow_samza_expand.core.groupers import GROUPERS
from airflow_samza_expand.core.model import DEFAULT_GROUPER, DEFAULT_SYSTEM, JobModel, pretty_json

SAMPLE_JOB_MODEL = "airflow_samza_expand/examples/sample_job_model.json"


class UsageError(Exception):
    """Bad command-line input; the message says what and how to fix it."""


def parse_counts(values: list[str] | None, option: str) -> dict[str, int]:
    """``["orders=8", "payments=4,refunds=2"]`` -> ``{"orders": 8, ...}``."""
    counts: dict[str, int] = {}
    for value in values or []:
        for item in filter(None, (part.strip() for part in value.split(","))):
            stream, sep, raw = item.partition("=")
            stream, raw = stream.strip(), raw.strip()
            if not sep or not stream or not raw:
                raise UsageError(
                    f"{option} {item!r} must look like STREAM=COUNT - e.g. {option} orders=8"
                )
            try:
                count = int(raw)
            except ValueError:
                raise UsageError(
                    f"{option} {item!r}: {raw!r} is not a whole number - e.g. {option} {stream}=8"
                ) from None
            if stream in counts and counts[stream] != count:
                raise UsageError(
                    f"{option} names stream '{stream}' twice ({counts[stream]} and {count}) - "
                    "give each stream once"
                )
            counts[stream] = count
    return counts


def register(subparsers: Any) -> None:
    """Add the ``plan`` subcommand to the ``samza-expand`` parser."""
    parser = subparsers.add_parser(
        "plan",
        help="show how growing input streams maps partitions to tasks (SEP-5), offline",
        description=(
            "Plan a partition expansion: the new SSP -> task mapping (job model vN+1), the "
            "ordering-barrier partitions, and a diagram of partitions -> buckets -> tasks. "
            "Reads a job model file or builds version 1 from --partitions; touches no cluster."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"example:\n  samza-expand plan --job-model {SAMPLE_JOB_MODEL} --target orders=8",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--job-model", metavar="FILE", help="job model JSON document (vN)")
    source.add_argument(
        "--partitions",
        metavar="STREAM=N",
        action="append",
        help="build job model v1 from these streams instead (repeat or comma-separate)",
    )
    parser.add_argument(
        "--target",
        metavar="STREAM=N",
        action="append",
        required=True,
        help="new partition count of a stream: current x 2^k (repeat or comma-separate)",
    )
    parser.add_argument("--job-name", default="job", help="job name with --partitions")
    parser.add_argument(
        "--max-partitions",
        type=int,
        default=DEFAULT_MAX_PARTITIONS,
        metavar="N",
        help=f"refuse a target above N partitions (default {DEFAULT_MAX_PARTITIONS})",
    )
    parser.add_argument("--system", default=DEFAULT_SYSTEM, help="system name with --partitions")
    parser.add_argument(
        "--grouper",
        default=DEFAULT_GROUPER,
        choices=sorted(GROUPERS),
        help=f"SSP grouper with --partitions (default {DEFAULT_GROUPER})",
    )
    parser.add_argument(
        "--algorithm",
        default=DEFAULT_ALGORITHM_PATH,
        metavar="DOTTED.PATH",
        help="expansion algorithm with --partitions (default: p %% initial count)",
    )
    parser.add_argument(
        "--cluster-partitions",
        metavar="STREAM=N",
        action="append",
        help="partition counts now on the cluster, if not the job model's",
    )
    parser.add_argument(
        "--allow-any-multiple",
        action="store_true",
        help="accept growth by any multiple, not only by a power of two",
    )
    parser.add_argument(
        "--created-at",
        metavar="ISO-8601",
        help="timestamp of the new job model (default now), for reproducible output",
    )
    parser.add_argument(
        "--write-job-model", metavar="FILE", help="also write job model vN+1 as JSON to FILE"
    )
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.set_defaults(func=run)


def _load_model(args: argparse.Namespace) -> JobModel:
    if args.job_model:
        path = Path(args.job_model)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(
                f"cannot read job model {str(path)!r}: {exc.strerror or exc} - pass the path of a "
                f"job model JSON file, e.g. --job-model {SAMPLE_JOB_MODEL}"
            ) from None
        try:
            return JobModel.from_json(text)
        except ExpansionError as exc:
            raise UsageError(
                f"{path}: {exc} - --job-model takes a job model JSON document as `samza-expand "
                f"plan --write-job-model` writes it (e.g. {SAMPLE_JOB_MODEL}); or build v1 "
                "with --partitions STREAM=N instead"
            ) from None
    try:
        coordinator_topic(args.job_name)
    except ValueError:
        raise UsageError(
            f"--job-name {args.job_name!r} cannot name a Kafka topic (the job's coordinator "
            "topic and consumer group take it) - use 1-229 characters of a-z, A-Z, 0-9, '.', "
            "'_', '-'"
        ) from None
    counts = parse_counts(args.partitions, "--partitions")
    return JobModel.initial(
        args.job_name,
        counts,
        system=args.system,
        grouper=args.grouper,
        expansion_algorithm=args.algorithm,
        created_at=args.created_at,
    )


def run(args: argparse.Namespace) -> int:
    try:
        model = _load_model(args)
        targets = parse_counts(args.target, "--target")
        cluster = parse_counts(args.cluster_partitions, "--cluster-partitions")
        counts = {**model.partition_counts(), **cluster} if cluster else None
        plan = plan_expansion(
            model,
            counts,
            targets,
            require_power_of_two=not args.allow_any_multiple,
            created_at=args.created_at,
            max_partitions=args.max_partitions,
        )
        if args.write_job_model:
            Path(args.write_job_model).write_text(plan.new_job_model.to_json() + "\n")
    except MaxPartitionsError as exc:  # the library names its argument; here it is a flag
        text = str(exc).replace("max_partitions=", "--max-partitions ")
        print(f"error: {text.replace('raise max_partitions', 'raise --max-partitions')}",
              file=sys.stderr)  # fmt: skip
        return 2
    except (UsageError, ExpansionError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(
            f"error: cannot write {args.write_job_model!r}: {exc.strerror or exc} - choose a "
            "writable path for --write-job-model",
            file=sys.stderr,
        )
        return 2
    if args.json:
        print(pretty_json(plan.to_dict()))
    else:
        print(render_plan(plan))
        if args.write_job_model:
            print(f"\nWrote job model v{plan.new_version} to {args.write_job_model}")
    return 0


__all__ = ["parse_counts", "register", "run"]
