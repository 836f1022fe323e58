"""`samza-expand init-job`: write job model v1 of a job reading EXISTING input topics.

    samza-expand init-job orders-counter --topic orders \\
        --bootstrap-servers localhost:9092 --create-output-topic orders-counts

Reads each input topic's partition count and writes version 1 of the job model (FixedTasks
grouper: one task per partition, for good) to the job's coordinator store on Kafka. Idempotent:
an identical v1 already there is success. Refused (exit 2, nothing written, no topic created):
an input topic that does not exist, or an existing v1 that differs. `--create-output-topic`
also creates the job's output topic (kept as it is if it exists).

Moving an existing job onto the runtime (stop it first): `--from-checkpoint DIR` (its Spark
checkpoint, a path or an fsspec URL: a job on Spark's own Kafka source) takes the offsets of
the checkpoint's last committed batch; `--from-group GROUP` (the consumer group the job used)
takes that group's committed offsets. Either is copied into the job's own group
(`--consumer-group`, default the job name), so lag tools, the barrier and the job page are
right from the first minute, and a job without a checkpoint starts there. Refused, with
nothing written: the old job still runs (live members in GROUP, or a runtime job's live
processors on it; a checkpoint that gets a newer batch within `--quiet-s`), a group with no
committed offset on the topics, a checkpoint with no committed batch (only one in flight),
or whose sources are not Spark's Kafka source, or that reads other topics or partitions than
`--topic` has today, or a job group that already holds a different position.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_samza_expand._kafka.admin import KafkaAdmin, KafkaUnavailableError
from airflow_samza_expand._protocol.cli import args as cli_args
from airflow_samza_expand._protocol.cli import init_adopt
from airflow_samza_expand._protocol.cli.init_adopt import (
    Adoption,
    InitJobRefused,
    from_group,
    live_processors,
    refuse_live_processors,
)
from airflow_samza_expand.core.errors import ExpansionError, UnknownTopicError
from airflow_samza_expand.core.groupers import GROUPERS
from airflow_samza_expand.core.model import DEFAULT_GROUPER, JobModel
from airflow_samza_expand.store import coordinator_topic as store_topic
from airflow_samza_expand.store import open_store, store_location

log = logging.getLogger(__name__)

CREATED_BY = "samza-expand init-job"


DEFAULT_QUIET_S = 5.0  # --quiet-s: how long a checkpoint must get no newer batch


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
                f"\nposition of {self.adopted_from} copied into group "
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
    from_checkpoint: str | None = None,
    quiet_s: float = DEFAULT_QUIET_S,
) -> InitResult:
    """Write job model v1 of `job_name` over the existing `topics` (see the module docstring).
    `coordinator`: the store URI ('kafka', 'kafka://TOPIC', a path; default 'kafka', or
    'kafka://<coordinator_topic>' when that is given). `admin`: a client to use (kept open).
    `from_group` / `from_checkpoint`: copy that group's / checkpoint's position into
    `consumer_group` (default the job name); `quiet_s`: how long the checkpoint must stay quiet.

    InitJobRefused (nothing written) for a missing topic, a differing v1, a position refused.
    """
    if output_partitions < 1:
        raise InitJobRefused(
            f"--output-partitions must be >= 1, got {output_partitions} - e.g. "
            "--output-partitions 1"
        )
    if from_group and from_checkpoint:
        raise InitJobRefused(
            "--from-group and --from-checkpoint exclude each other: give the checkpoint of a "
            "job on Spark's own Kafka source, or the consumer group a job committed to"
        )
    uri = coordinator or (f"kafka://{coordinator_topic}" if coordinator_topic else "kafka")
    owned = admin is None
    admin = KafkaAdmin(config, timeout_s=timeout_s) if admin is None else admin
    try:
        group = consumer_group or job_name
        counts = _counts(admin, topics)
        adoption = None
        if from_group:
            adoption = _from_group(admin, config, uri, job_name, from_group, group, counts,
                                   timeout_s)  # fmt: skip
        elif from_checkpoint:
            adoption = init_adopt.from_checkpoint(admin, from_checkpoint, group, counts, quiet_s)
        return _init(admin, config, job_name, counts, uri, grouper, output_topic,
                     output_partitions, timeout_s, adoption, group)  # fmt: skip
    finally:
        if owned:
            admin.close()


def _counts(admin: KafkaAdmin, topics: Sequence[str]) -> dict[str, int]:
    try:
        return admin.partition_counts(topics)
    except UnknownTopicError as exc:
        raise InitJobRefused(
            f"{exc}. init-job writes the job model of an EXISTING input topic and creates "
            "no input topic: create it with the partition count you want (e.g. "
            "kafka-topics.sh --create --topic NAME --partitions 2) and rerun; nothing written"
        ) from None


def _from_group(
    admin: KafkaAdmin,
    config: Mapping[str, str],
    uri: str,
    job_name: str,
    old_group: str,
    group: str,
    counts: Mapping[str, int],
    timeout_s: float,
) -> Adoption:
    """The group's position, refused while consumers (members) or the processors of the
    runtime job of that name (they commit with assign(), no members) still run."""
    adoption = from_group(admin, old_group, group, counts)
    for job in dict.fromkeys((job_name, old_group)):
        if job == job_name or _has_store(admin, config, uri, job):
            with open_store(uri, job, config, timeout_s=timeout_s) as st:
                refuse_live_processors(live_processors(st.processors(), old_group, job),
                                       old_group, job)  # fmt: skip
    return adoption


def _has_store(admin: KafkaAdmin, config: Mapping[str, str], uri: str, job: str) -> bool:
    """Whether a job named `job` can have a coordinator store next to this job's (a file tree,
    or its own default topic, which exists), read without creating anything."""
    try:
        kind, where = store_location(uri, config)
        topic = store_topic(job)
    except (ExpansionError, ValueError):  # not a job name: no runtime job of that name
        return False
    return kind == "files" or (not where and topic in admin.topic_names())


def _init(
    admin: KafkaAdmin,
    config: Mapping[str, str],
    job_name: str,
    counts: Mapping[str, int],
    uri: str,
    grouper: str,
    output_topic: str | None,
    output_partitions: int,
    timeout_s: float,
    adoption: Adoption | None = None,
    group: str = "",
) -> InitResult:
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
                "or pick another job name for a new job"
            )
        written = existing is None
        model = st.write_job_model(model) if existing is None else existing
        warning = getattr(st, "replication_warning", None)  # a Kafka store on a cluster
        if warning:
            log.warning("%s", warning)
    if adoption and adoption.copy:
        admin.commit_group_offsets(group, adoption.position)
    created = False
    if output_topic:
        created = admin.ensure_topic(output_topic, output_partitions)
    return InitResult(
        model, written, where, output_topic, created, warning,
        adoption.source if adoption else None, adoption.position if adoption else None, group,
    )  # fmt: skip


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
    p.add_argument("--from-checkpoint", metavar="DIR", default=None,
                   help="move an existing job on Spark's own Kafka source: copy the offsets of "
                   "its checkpoint's last committed batch (a path or an fsspec URL; stop the "
                   "job first) into the job's group; not with --from-group")  # fmt: skip
    p.add_argument("--quiet-s", type=float, default=DEFAULT_QUIET_S, metavar="SECONDS",
                   help="--from-checkpoint: refuse if the checkpoint gets a newer batch "
                   f"within this long (a query still writes it; default "
                   f"{DEFAULT_QUIET_S:g})")  # fmt: skip
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
        if args.quiet_s < 0:
            raise InitJobRefused(f"--quiet-s {args.quiet_s:g} - give seconds >= 0, e.g. 5")
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
                from_checkpoint=args.from_checkpoint,
                quiet_s=args.quiet_s,
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
