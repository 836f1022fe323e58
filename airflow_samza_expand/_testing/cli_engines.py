"""`samza-expand apache-kafka` (and the serving loop of `samza-expand spark-standalone`): run the
real engines the tests use in the foreground on 127.0.0.1 until Ctrl-C (test/dev only)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any

KAFKA_DESCRIPTION = (
    "Run Apache Kafka (the version pinned in airflow_samza_expand/_testing/apache_kafka/pom.xml, "
    "fetched with Maven from Maven Central into ~/.cache/airflow-samza-expand on first use) as "
    "one KRaft broker+controller on 127.0.0.1, in the foreground until Ctrl-C. For tests and "
    "development: one replica, plaintext, no authentication."
)


def _serve(what: str, start: Any, stop: Any, lines: list[str]) -> int:
    """Start, print `lines`, wait for SIGINT/SIGTERM, stop."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    try:
        start()
    except (RuntimeError, TimeoutError) as exc:
        print(f"error: {what} did not start: {exc}", file=sys.stderr)
        stop()
        return 1
    for line in lines():
        print(line, flush=True)
    done.wait()
    stop()
    return 0


def run_kafka(args: argparse.Namespace) -> int:
    from .apache_kafka_process import ApacheKafkaProcess, fetch_apache_kafka, kafka_version

    if not 0 <= args.port <= 65535:
        print(f"error: --port {args.port} is not a TCP port - use 0..65535", file=sys.stderr)
        return 2
    if args.fetch_only:
        try:
            libs = fetch_apache_kafka()
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"Apache Kafka {kafka_version()} jars in {libs}")
        return 0
    if args.cluster is not None:
        return run_kafka_cluster(args)
    kafka = ApacheKafkaProcess(port=args.port, data_dir=args.data_dir, heap=args.heap)
    return _serve(
        "Apache Kafka",
        kafka.start,
        kafka.close,
        lambda: [
            f"Apache Kafka {kafka.version} at {kafka.bootstrap} (pid {kafka.pid}); "
            f"log {kafka.log_path}; Ctrl-C stops it"
        ],
    )


def run_kafka_cluster(args: argparse.Namespace) -> int:
    """``--cluster N``: N KRaft nodes (_testing/apache_kafka_cluster.py), replication N."""
    from .apache_kafka_cluster import ApacheKafkaCluster

    if args.cluster < 1:
        print(f"error: --cluster {args.cluster} - pass a node count >= 1 (e.g. 3)",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.port:
        print("error: --port picks one node's port - leave it out with --cluster (each node "
              "takes a free port)", file=sys.stderr)  # fmt: skip
        return 2
    heap = args.heap if args.heap != "512m" else "256m"
    cluster = ApacheKafkaCluster(args.cluster, work_dir=args.data_dir, heap=heap)

    def lines() -> list[str]:
        nodes = [f"  node {i}: {n.bootstrap} pid {n.pid}; log {n.log_path}"
                 for i, n in cluster.nodes.items()]  # fmt: skip
        return [
            f"Apache Kafka {cluster.version} cluster of {cluster.size} nodes at "
            f"{cluster.bootstrap} (replication {cluster.replication}, min.insync.replicas "
            f"{cluster.min_insync_replicas}); Ctrl-C stops it",
            *nodes,
            "stop or kill a node by its pid (`kill -TERM <pid>`: controlled shutdown)",
        ]

    return _serve("the Apache Kafka cluster", cluster.start, cluster.close, lines)


def register(subparsers: argparse._SubParsersAction) -> None:
    kafka = subparsers.add_parser(
        "apache-kafka", help="run Apache Kafka on 127.0.0.1 (tests/dev only)",
        description=KAFKA_DESCRIPTION,
    )  # fmt: skip
    kafka.add_argument("--port", type=int, default=0, help="Kafka port (default: a free one)")
    kafka.add_argument(
        "--data-dir", type=Path, default=None,
        help="keep the log here across restarts (default: a temporary dir)",
    )  # fmt: skip
    kafka.add_argument(
        "--heap", default="512m", help="JVM heap -Xmx (default 512m; 256m per node of --cluster)"
    )
    kafka.add_argument(
        "--cluster", type=int, default=None, metavar="N",
        help="run a cluster of N KRaft nodes (broker+controller each, e.g. 3) with replication "
        "N and min.insync.replicas 2; --data-dir keeps node-<i>/ under it",
    )  # fmt: skip
    kafka.add_argument(
        "--fetch-only", action="store_true",
        help="only fetch the jars into the cache (used by scripts/setup.sh)",
    )  # fmt: skip
    kafka.set_defaults(func=run_kafka)
