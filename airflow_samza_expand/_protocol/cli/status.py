"""`samza-expand status JOB` and `samza-expand stop JOB`: where a job and its expansions stand,
and the stop request an operator writes (the same control record the expansion's stop step
writes; the job's processors of that version stop at their next batch).

    samza-expand status orders-counter --bootstrap-servers localhost:9092
    samza-expand status orders-counter --bootstrap-servers localhost:9092 --json
    samza-expand stop orders-counter --bootstrap-servers localhost:9092 --reason upgrade --wait 60

Exit 0 done, 1 Kafka unreachable (or --wait ran out), 2 bad input or an unknown job.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
import time
from typing import Any

from airflow_samza_expand._kafka.admin import KafkaAdmin, KafkaUnavailableError
from airflow_samza_expand._protocol.cli import args as cli_args
from airflow_samza_expand._protocol.status.job_status import read_status, render
from airflow_samza_expand.core.errors import ExpansionError, UnknownTopicError
from airflow_samza_expand.store import CoordinatorStore, coordinator_topic, open_store

COORDINATOR_PREFIX = "__samza_coordinator_"


def register(subparsers: Any) -> None:
    """Add the ``status`` and ``stop`` subcommands."""
    status = subparsers.add_parser(
        "status",
        help="where a job and its expansions stand, and what to do next",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cli_args.add_job_argument(status)
    cli_args.add_kafka_arguments(status)
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.set_defaults(func=run_status)

    stop = subparsers.add_parser(
        "stop",
        help="ask a job's processors to stop (the stop step's control record)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cli_args.add_job_argument(stop)
    cli_args.add_kafka_arguments(stop)
    stop.add_argument("--reason", default="samza-expand stop", help="said in the stop record")
    stop.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait up to SECONDS for the processors to stop (default 0: do not wait)",
    )
    stop.set_defaults(func=run_stop)


class _Job:
    """The job's store (and admin client, on Kafka), checked to exist: a typo is refused with
    the jobs that do exist instead of reading an empty store."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.name = cli_args.job_name(args)
        kafka = cli_args.uses_kafka_store(args)
        remote = kafka or args.bootstrap_servers or args.kafka_config_id
        self.config = cli_args.kafka_config(args) if remote else None
        self.admin: KafkaAdmin | None = None
        if self.config is not None:
            self.admin = cli_args.connect(self.config, args.timeout)
        try:
            self.store: CoordinatorStore = self._open(args, kafka)
        except BaseException:
            self.close()
            raise

    def _open(self, args: argparse.Namespace, kafka: bool) -> CoordinatorStore:
        uri = args.coordinator
        if kafka and self.admin is not None:
            topic = uri[len("kafka://") :] if uri.startswith("kafka://") else ""
            topic = topic or coordinator_topic(self.name)
            names = self.admin.topic_names()
            if topic not in names:
                raise cli_args.UsageError(self._unknown(topic, names))
            self.where = f"topic {topic} at {self.admin.bootstrap}"
        else:
            self.where = uri
        return open_store(uri, self.name, self.config, timeout_s=args.timeout)

    def _unknown(self, topic: str, names: list[str]) -> str:
        cut = len(COORDINATOR_PREFIX)
        jobs = sorted(n[cut:] for n in names if n.startswith(COORDINATOR_PREFIX))
        close = difflib.get_close_matches(self.name, jobs, n=3)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        known = f"jobs on this Kafka: {', '.join(jobs)}" if jobs else "no job on this Kafka yet"
        return (
            f"no job {self.name!r}: its coordinator topic {topic} does not exist - {hint}{known}"
            " (a new job gets one from `samza-expand init-job`; a custom topic: --coordinator "
            "kafka://TOPIC)"
        )

    def live_counts(self, streams: list[str]) -> dict[str, int]:
        if self.admin is None or not streams:
            return {}
        try:
            return self.admin.partition_counts(streams)
        except UnknownTopicError:
            found = set(self.admin.topic_names())
            present = [s for s in streams if s in found]
            return self.admin.partition_counts(present) if present else {}

    def barrier_lag(self, record: Any, group: str) -> dict[str, dict[int, int]] | None:
        """The lag of `record`'s barrier in the job's `group` (None without Kafka)."""
        if self.admin is None:
            return None
        from airflow_samza_expand._protocol.barrier.reads import barrier_status

        return barrier_status(self.admin, group, record.barrier).lag

    def close(self) -> None:
        store = getattr(self, "store", None)
        if store is not None:
            store.close()
        if self.admin is not None:
            self.admin.close()


def _guarded(command: Any, args: argparse.Namespace) -> int:
    with cli_args.quiet_librdkafka():
        return _run(command, args)


def _run(command: Any, args: argparse.Namespace) -> int:
    try:
        job = _Job(args)
    except KafkaUnavailableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (cli_args.UsageError, ExpansionError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        return command(job, args)
    except KafkaUnavailableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (cli_args.UsageError, ExpansionError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        job.close()


def run_status(args: argparse.Namespace) -> int:
    return _guarded(_status, args)


def _status(job: _Job, args: argparse.Namespace) -> int:
    models = job.store.job_model_history()
    streams = sorted(models[-1].partition_counts()) if models else []
    status = read_status(job.store, job.where, job.live_counts(streams), job.barrier_lag)
    if args.json:
        print(json.dumps(status.to_dict(), indent=2, sort_keys=True))
    else:
        print("\n".join(render(status)))
    return 0


def run_stop(args: argparse.Namespace) -> int:
    if args.wait < 0:
        print(f"error: --wait {args.wait:g} - pass seconds >= 0 (0: do not wait)", file=sys.stderr)
        return 2
    return _guarded(_stop, args)


def _stop(job: _Job, args: argparse.Namespace) -> int:
    from airflow_samza_expand._protocol.steps.stop import request_stop, stop_poll

    if job.store.latest_job_model() is None:
        raise cli_args.UsageError(
            f"job {job.name} has no job model in {job.where}: nothing runs to stop"
        )
    decision = request_stop(job.store, args.reason)
    print(decision.message)
    if not decision.requested or args.wait == 0:
        return 0
    deadline = time.monotonic() + args.wait
    while True:
        poll = stop_poll(job.store, decision.version)
        if poll.done:
            print(poll.message)
            return 0
        if time.monotonic() >= deadline:
            print(f"after --wait {args.wait:g} s: {poll.message}", file=sys.stderr)
            return 1
        time.sleep(min(1.0, max(deadline - time.monotonic(), 0.0)))  # heartbeats are polled


__all__ = ["register", "run_status", "run_stop"]
