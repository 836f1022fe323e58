"""`samza-expand dev broker`: run the development Kafka broker in the foreground (test/dev only)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

DESCRIPTION = (
    "Run a single-node development Kafka broker on the real wire protocol, for tests, the demo "
    "and local development only (no replication, transactions, retention or security; use "
    "Apache Kafka in production). Runs in the foreground until Ctrl-C / SIGTERM and logs each "
    "connection and topic change (each request with --log-level DEBUG)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    parser.add_argument(
        "--port", type=int, default=9092, help="Kafka port (default 9092; 0 picks a free port)"
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="keep topics, logs and committed offsets here across restarts (default: in memory)",
    )
    parser.add_argument(
        "--control-port",
        type=int,
        default=0,
        help="loopback port of the fault-injection control channel (default: a free port)",
    )
    parser.add_argument(
        "--advertised-host",
        default=None,
        help="host name put in Metadata responses (default: --host)",
    )
    parser.add_argument(
        "--auto-create-topics",
        action="store_true",
        help="create unknown topics on Metadata requests that allow it",
    )
    parser.add_argument(
        "--group-initial-rebalance-delay-ms",
        type=int,
        default=0,
        help="how long a new group waits for more members before its first generation "
        "(Kafka's group.initial.rebalance.delay.ms; default 0)",
    )
    parser.add_argument(
        "--exit-with-parent",
        action="store_true",
        help="stop when the process that started the broker exits (used by test fixtures)",
    )
    parser.add_argument(
        "--ready-file",
        type=Path,
        default=None,
        help="write {host, port, control_port, pid} as JSON here once listening",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="DEBUG logs every request (default INFO)",
    )


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        print(f"error: --port {args.port} is not a TCP port - use 0..65535", file=sys.stderr)
        return 2
    if args.group_initial_rebalance_delay_ms < 0:
        print(
            "error: --group-initial-rebalance-delay-ms must be >= 0 - pass 0 to disable it",
            file=sys.stderr,
        )
        return 2
    if args.data_dir is not None and args.data_dir.exists() and not args.data_dir.is_dir():
        print(
            f"error: --data-dir {args.data_dir} is not a directory - pass a directory path",
            file=sys.stderr,
        )
        return 2
    try:
        import kio  # noqa: F401
    except ImportError:
        print(
            "error: the development broker needs kio - install the 'testing' extra "
            "(pip install 'airflow-samza-expand[testing]')",
            file=sys.stderr,
        )
        return 2
    from .broker import Broker, run_broker

    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    broker = Broker(
        host=args.host,
        port=args.port,
        data_dir=args.data_dir,
        control_port=args.control_port,
        advertised_host=args.advertised_host,
        auto_create_topics=args.auto_create_topics,
        initial_rebalance_delay_s=args.group_initial_rebalance_delay_ms / 1000,
    )
    try:
        asyncio.run(run_broker(broker, args.ready_file, args.exit_with_parent))
    except OSError as exc:
        print(
            f"error: cannot listen on {args.host}:{args.port}: {exc} - choose another "
            "--port (0 picks a free one)",
            file=sys.stderr,
        )
        return 2
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "broker",
        help="run the development Kafka broker (tests/dev only)",
        description=DESCRIPTION,
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m airflow_samza_expand._testing", description=DESCRIPTION
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))
