"""What the operator commands of ``samza-expand`` (init-job, status, stop) share: one spelling
of each flag, and one short reachability check of Kafka that ends in one line instead of
librdkafka's retry log.

    JOB (or --job-name JOB)
    --coordinator kafka|kafka://TOPIC|PATH
    --bootstrap-servers HOST:PORT[,...]  --kafka-config FILE  --kafka-config-id CONN
    --timeout SECONDS

The bootstrap servers come from --bootstrap-servers, else from --kafka-config's
bootstrap.servers, else from the environment variable SAMZA_EXPAND_BOOTSTRAP_SERVERS (the one
the example DAGs read). --kafka-config-id names an Airflow connection instead (the operators'
``kafka_config_id``), whose whole client
config the command line (which may import Airflow) reads into ``args.connection_config``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
from collections.abc import Iterator, Mapping

from airflow_samza_expand._kafka.admin import KafkaAdmin, KafkaUnavailableError
from airflow_samza_expand._kafka.config import LIBRDKAFKA_LOGGER, bootstrap_of, client_config
from airflow_samza_expand.core._names import coordinator_topic
from airflow_samza_expand.store import parse_coordinator

DEFAULT_TIMEOUT_S = 10.0
BOOTSTRAP_ENV = "SAMZA_EXPAND_BOOTSTRAP_SERVERS"
NO_SERVERS = (
    "no Kafka bootstrap servers - pass --bootstrap-servers HOST:PORT (e.g. "
    "--bootstrap-servers localhost:9092), a --kafka-config FILE that sets bootstrap.servers, "
    f"or set {BOOTSTRAP_ENV}"
)


class UsageError(Exception):
    """Bad command-line input; the message names the problem and the fix."""


def add_job_argument(parser: argparse.ArgumentParser) -> None:
    """The job, named the same way in every command: the JOB argument, or ``--job-name``."""
    parser.add_argument(
        "job",
        nargs="?",
        metavar="JOB",
        help="the job's name: its consumer group and coordinator topic __samza_coordinator_<JOB>",
    )
    parser.add_argument("--job-name", default=None, metavar="JOB", help="the same as JOB")


def add_kafka_arguments(parser: argparse.ArgumentParser, *, coordinator: bool = True) -> None:
    """``--bootstrap-servers``, ``--kafka-config``, ``--kafka-config-id``, ``--timeout`` and
    ``--coordinator``."""
    parser.add_argument(
        "--bootstrap-servers",
        help=f"Kafka bootstrap servers HOST:PORT[,...] (default: ${BOOTSTRAP_ENV})",
    )
    parser.add_argument(
        "--kafka-config",
        metavar="FILE",
        help="librdkafka key=value settings (security.protocol, sasl.*, ssl.*, ...)",
    )
    parser.add_argument(
        "--kafka-config-id",
        metavar="CONN",
        help="an Airflow connection of the provider (its extra: bootstrap.servers and the "
        "client settings), instead of --bootstrap-servers / --kafka-config; needs Airflow",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"how long to wait for Kafka (default {DEFAULT_TIMEOUT_S:g})",
    )
    if coordinator:
        parser.add_argument(
            "--coordinator",
            default="kafka",
            help="coordinator store: 'kafka' (topic __samza_coordinator_<job>, the default), "
            "'kafka://TOPIC', or a directory / fsspec URL of a file store",
        )


def job_name(args: argparse.Namespace) -> str:
    """The job of the command (JOB or --job-name), checked to name a Kafka topic."""
    positional = getattr(args, "job", None)
    flag = getattr(args, "job_name", None)
    if positional and flag and positional != flag:
        raise UsageError(
            f"two job names: {positional!r} and --job-name {flag!r} - give the job once"
        )
    name = positional or flag
    if not name:
        command = getattr(args, "command", None) or "COMMAND"
        raise UsageError(f"which job? - name it, e.g. samza-expand {command} orders-counter")
    check_job_name(name, "JOB" if positional else "--job-name")
    return name


def check_job_name(name: str, flag: str = "--job-name") -> None:
    """UsageError naming the flag when `name` cannot name the job's Kafka topics."""
    try:
        coordinator_topic(name)
    except ValueError:
        raise UsageError(
            f"{flag} {name!r} cannot name a Kafka topic (the job's coordinator topic and "
            "consumer group take it) - use 1-229 characters of a-z, A-Z, 0-9, '.', '_', '-'"
        ) from None


def kafka_config(args: argparse.Namespace) -> dict[str, str]:
    """The client config of --bootstrap-servers / --kafka-config, the servers falling back to
    $SAMZA_EXPAND_BOOTSTRAP_SERVERS (UsageError naming the flag)."""
    if args.timeout <= 0:
        raise UsageError(f"--timeout {args.timeout:g} - pass a number of seconds > 0, e.g. 10")
    if getattr(args, "kafka_config_id", None):
        if args.bootstrap_servers or args.kafka_config:
            raise UsageError(
                f"--kafka-config-id {args.kafka_config_id} gives the whole client config - drop "
                "--bootstrap-servers and --kafka-config, or --kafka-config-id"
            )
        connection = getattr(args, "connection_config", None)
        if connection is None:  # only `samza-expand` (cli.main) reads the connection
            raise UsageError("--kafka-config-id is read by the samza-expand command")
        return dict(connection)
    from_env = os.environ.get(BOOTSTRAP_ENV, "").strip() or None
    try:
        try:
            return client_config(args.bootstrap_servers, args.kafka_config)
        except ValueError as exc:
            if "no Kafka bootstrap servers" not in str(exc) or from_env is None:
                raise
            return client_config(from_env, args.kafka_config)
    except ValueError as exc:
        if "no Kafka bootstrap servers" in str(exc):
            raise UsageError(NO_SERVERS) from None
        raise UsageError(str(exc)) from None


def uses_kafka_store(args: argparse.Namespace) -> bool:
    try:
        return parse_coordinator(args.coordinator).kind == "kafka"
    except ValueError as exc:
        raise UsageError(f"--coordinator: {exc}") from None


@contextlib.contextmanager
def quiet_librdkafka() -> Iterator[None]:
    """librdkafka logs every failed connection attempt (hundreds of lines while a broker is
    down); a command reports the outcome in one line instead. The level is restored after."""
    level = LIBRDKAFKA_LOGGER.level
    LIBRDKAFKA_LOGGER.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        LIBRDKAFKA_LOGGER.setLevel(level)


def connect(config: Mapping[str, str], timeout_s: float) -> KafkaAdmin:
    """An admin client once one metadata request within `timeout_s` answered, else
    KafkaUnavailableError saying, in one line, which servers and what to check. Call it
    inside `quiet_librdkafka()`."""
    admin = KafkaAdmin(config, timeout_s=timeout_s)
    try:
        admin.topic_names()
    except KafkaUnavailableError:
        admin.close()
        raise KafkaUnavailableError(
            f"cannot reach Kafka at {bootstrap_of(config)} within {timeout_s:g} s - check "
            f"--bootstrap-servers (or --kafka-config, --kafka-config-id, ${BOOTSTRAP_ENV}) and "
            "that the brokers run; --timeout waits longer"
        ) from None
    except BaseException:
        admin.close()
        raise
    return admin


__all__ = [
    "BOOTSTRAP_ENV",
    "DEFAULT_TIMEOUT_S",
    "UsageError",
    "add_job_argument",
    "add_kafka_arguments",
    "check_job_name",
    "connect",
    "job_name",
    "kafka_config",
    "quiet_librdkafka",
    "uses_kafka_store",
]
