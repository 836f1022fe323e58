"""`samza-expand init-job`: write job model v1 of a job reading EXISTING input topics.

    samza-expand init-job --job-name orders-counter --topic orders \\
        --bootstrap-servers localhost:9092 --create-output-topic orders-counts

Reads each input topic's partition count and writes version 1 of the job model (FixedTasks
grouper: one task per partition, for good) to the job's coordinator store on Kafka. Idempotent:
an identical v1 already there is success. Refused (exit 2, nothing written, no topic created):
an input topic that does not exist, or an existing v1 that differs. `--create-output-topic`
also creates the job's output topic (kept as it is if it exists).

Moving an existing job onto the runtime: `--from-group GROUP` (the consumer group the job used
before; stop it first) copies that group's committed offsets on the input topics into the
job's own group (`--consumer-group`, default the job name), so the job's first run on the
runtime starts where the old one stopped instead of at the log start. Refused, with nothing
written: a group with no committed offset on the topics, or a job group that already holds a
different position.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_samza_expand._kafka.admin import KafkaAdmin, KafkaUnavailableError
from airflow_samza_expand._protocol import cli_args
from airflow_samza_expand.core.errors import ExpansionError, UnknownTopicError
from airflow_samza_expand.core.groupers import GROUPERS
from airflow_samza_expand.core.model import DEFAULT_GROUPER, JobModel
from airflow_samza_expand.store import open_store

log = logging.getLogger(__name__)

CREATED_BY = "samza-expand init-job"


class InitJobRefused(ExpansionError):
    """The job cannot be initialised as asked; nothing was written (the message says why)."""


@dataclass(frozen=True)
class InitResult:
    """What `init_job` did: the v1 in force, whether this call wrote it, the output topic."""

    model: JobModel
    written: bool
    coordinator_topic: str
    output_topic: str | None = None
    output_created: bool = False
    warning: str | None = None  # e.g. a coordinator topic with 1 replica on a cluster
    # --from-group: the position copied into the job's group ({topic: {partition: offset}})
    adopted_from: str | None = None
    position: Mapping[str, Mapping[int, int]] | None = None
    consumer_group: str | None = None

    def describe(self) -> str:
        tasks = "; ".join(
            f"{task}: {', '.join(f'{s.stream}[{s.partition}]' for s in sorted(ssps))}"
            for task, ssps in sorted(self.model.task_to_ssps().items())
        )
        done = "wrote" if self.written else "already there, same content (nothing written):"
        line = f"{done} job model v1 of {self.model.job_name} in {self.coordinator_topic}: {tasks}"
        if self.output_topic:
            state = "created" if self.output_created else "exists, kept"
            line += f"\noutput topic {self.output_topic}: {state}"
        if self.adopted_from and self.position is not None:
            where = ", ".join(
                f"{t}[{p}] {o}"
                for t, ps in sorted(self.position.items())
                for p, o in sorted(ps.items())
            )
            line += (
                f"\nposition of group {self.adopted_from} copied into group "
                f"{self.consumer_group}: {where} (the job's first run starts there)"
            )
        if self.warning:
            line += f"\nwarning: {self.warning}"
        return line


def init_job(
    config: Mapping[str, str],
    job_name: str,
    topics: Sequence[str],
    *,
    coordinator_topic: str | None = None,
    grouper: str = DEFAULT_GROUPER,
    output_topic: str | None = None,
    output_partitions: int = 1,
    timeout_s: float = 30.0,
    coordinator: str | None = None,
    admin: KafkaAdmin | None = None,
    from_group: str | None = None,
    consumer_group: str | None = None,
) -> InitResult:
    """Write job model v1 of `job_name` over the existing `topics` (see the module docstring).
    `coordinator`: the store URI ('kafka', 'kafka://TOPIC', a path; default 'kafka', or
    'kafka://<coordinator_topic>' when that is given). `admin`: a client to use (kept open).
    `from_group`: copy that group's position into `consumer_group` (default the job name).

    InitJobRefused (nothing written) for a missing topic or a differing v1.
    """
    if output_partitions < 1:
        raise InitJobRefused(
            f"--output-partitions must be >= 1, got {output_partitions} - e.g. "
            "--output-partitions 1"
        )
    uri = coordinator or (f"kafka://{coordinator_topic}" if coordinator_topic else "kafka")
    owned = admin is None
    admin = KafkaAdmin(config, timeout_s=timeout_s) if admin is None else admin
    try:
        group = consumer_group or job_name
        return _init(admin, config, job_name, topics, uri, grouper, output_topic,
                     output_partitions, timeout_s, from_group, group)  # fmt: skip
    finally:
        if owned:
            admin.close()


def _init(
    admin: KafkaAdmin,
    config: Mapping[str, str],
    job_name: str,
    topics: Sequence[str],
    uri: str,
    grouper: str,
    output_topic: str | None,
    output_partitions: int,
    timeout_s: float,
    from_group: str | None = None,
    group: str = "",
) -> InitResult:
    try:
        counts = admin.partition_counts(topics)
    except UnknownTopicError as exc:
        raise InitJobRefused(
            f"{exc}. init-job writes the job model of an EXISTING input topic and creates "
            "no input topic: create it with the partition count you want (e.g. "
            "kafka-topics.sh --create --topic NAME --partitions 2) and rerun; nothing written"
        ) from None
    position, copy = ({}, False)
    if from_group:
        position, copy = _position_to_adopt(admin, from_group, group, counts)
    model = JobModel.initial(job_name, counts, grouper=grouper, created_by=CREATED_BY)
    with open_store(uri, job_name, config, timeout_s=timeout_s) as st:
        where = getattr(st, "topic", uri)  # a file store has no topic
        existing = st.job_model(1)
        if existing is not None and not existing.content_equals(model):
            latest = st.latest_job_model()
            newest = latest.version if latest else 1
            raise InitJobRefused(
                f"job {job_name!r} already has a job model v1 in {where} that differs "
                f"(v1 reads {existing.partition_counts()}, grouper {existing.grouper}; asked "
                f"{model.partition_counts()}, grouper {model.grouper}; newest is "
                f"v{newest}) - nothing written. The job is initialised already: keep it, "
                "or pick another --job-name for a new job"
            )
        written = existing is None
        model = st.write_job_model(model) if existing is None else existing
        warning = getattr(st, "replication_warning", None)  # a Kafka store on a cluster
        if warning:
            log.warning("%s", warning)
    if copy:
        admin.commit_group_offsets(group, position)
    created = False
    if output_topic:
        created = admin.ensure_topic(output_topic, output_partitions)
    return InitResult(
        model, written, where, output_topic, created, warning, from_group, position or None, group
    )


def _committed(offsets: Mapping[str, Mapping[int, int | None]]) -> dict[str, dict[int, int]]:
    """The committed offsets only ({topic: {partition: offset}}, topics with none left out)."""
    kept = {t: {p: o for p, o in ps.items() if o is not None} for t, ps in sorted(offsets.items())}
    return {t: ps for t, ps in kept.items() if ps}


def _position_to_adopt(
    admin: KafkaAdmin, from_group: str, group: str, counts: Mapping[str, int]
) -> tuple[dict[str, dict[int, int]], bool]:
    """`from_group`'s committed offsets and whether to copy them into `group` (not when it is
    the same group or holds them already: a rerun). InitJobRefused when there is nothing to
    copy or `group` holds another position."""
    wanted = {topic: list(range(count)) for topic, count in counts.items()}
    position = _committed(admin.group_offsets(from_group, wanted))
    if not position:
        raise InitJobRefused(
            f"consumer group {from_group!r} has committed no offset on {sorted(counts)} - "
            "nothing written. Give the group the existing job commits to (kafka-consumer-groups.sh "
            "--list; a Spark job on its own Kafka source commits none: start it from its log "
            "start, or commit its position with kafka-consumer-groups.sh --reset-offsets)"
        )
    if from_group == group:
        return position, False  # the job goes on committing to the group it used
    held = _committed(admin.group_offsets(group, wanted))
    if held == position:
        return position, False
    if held:
        raise InitJobRefused(
            f"the job's consumer group {group!r} already holds a position ({held}), not "
            f"{from_group!r}'s ({position}) - nothing written. The job has run already: keep "
            "its position, or reset the group (kafka-consumer-groups.sh --reset-offsets) first"
        )
    return position, True


def register(subparsers: Any) -> None:
    """Add the ``init-job`` subcommand to the ``samza-expand`` parser."""
    p = subparsers.add_parser(
        "init-job",
        help="write job model v1 of a job reading existing Kafka topics (idempotent)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cli_args.add_job_argument(p)
    p.add_argument("--topic", action="append", required=True, metavar="TOPIC",
                   help="an existing input topic (repeat for several)")  # fmt: skip
    cli_args.add_kafka_arguments(p)
    p.add_argument("--grouper", default=DEFAULT_GROUPER, choices=sorted(GROUPERS),
                   help=f"SSP grouper of v1 (default {DEFAULT_GROUPER})")  # fmt: skip
    p.add_argument("--create-output-topic", metavar="NAME", default=None,
                   help="also create the job's output topic (kept if it exists)")  # fmt: skip
    p.add_argument("--output-partitions", type=int, default=1,
                   help="partitions of a created output topic (default 1)")  # fmt: skip
    p.add_argument("--from-group", metavar="GROUP", default=None,
                   help="move an existing job: copy the committed offsets of the consumer "
                   "group it used (stop it first) into the job's group, where its first run "
                   "starts")  # fmt: skip
    p.add_argument("--consumer-group", metavar="GROUP", default=None,
                   help="the job's consumer group, as the job's --consumer-group (default: the "
                   "job name)")  # fmt: skip
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Exit 0 written or already there, 2 refused or bad input, 1 Kafka unreachable."""
    try:
        job = cli_args.job_name(args)
        config = cli_args.kafka_config(args)
        cli_args.uses_kafka_store(args)
        topics = list(dict.fromkeys(t.strip() for t in args.topic if t.strip()))
        if not topics:
            raise InitJobRefused("give at least one --topic (an existing input topic)")
        with cli_args.quiet_librdkafka(), cli_args.connect(config, args.timeout) as admin:
            result = init_job(
                config,
                job,
                topics,
                coordinator=args.coordinator,
                grouper=args.grouper,
                output_topic=args.create_output_topic,
                output_partitions=args.output_partitions,
                timeout_s=args.timeout,
                admin=admin,
                from_group=args.from_group,
                consumer_group=args.consumer_group,
            )
    except KafkaUnavailableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (cli_args.UsageError, ExpansionError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(result.describe())
    return 0


__all__ = ["InitJobRefused", "InitResult", "init_job", "register", "run"]
