"""`samza-expand` command line: each subcommand lives in its own module and registers itself."""

from __future__ import annotations

import argparse
import importlib
import sys

# Module that defines each subcommand's `register(subparsers)`; imported lazily so that
# `samza-expand plan` never pays for Spark or the broker.
SUBCOMMAND_MODULES: dict[str, str] = {
    "plan": "airflow_samza_expand.core.cli_plan",
    "init-job": "airflow_samza_expand.protocol.init_job",
    "dev-broker": "airflow_samza_expand.testing.cli",
    "demo": "airflow_samza_expand.demo.cli",
    "apache-kafka": "airflow_samza_expand.testing.cli_engines",
    "spark-standalone": "airflow_samza_expand.testing.spark_standalone",
    "spark-kafka-jars": "airflow_samza_expand.testing.spark_kafka",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="samza-expand",
        description=(
            "Expand the Kafka input topics of a stateful stream job, keeping state and order."
        ),
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module_name in SUBCOMMAND_MODULES.items():
        if only is not None and name != only:
            subparsers.add_parser(name, help=f"(see samza-expand {name} --help)")
            continue
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(only=command if command in SUBCOMMAND_MODULES else None)
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
