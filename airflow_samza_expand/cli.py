"""`samza-expand` command line: each subcommand lives in its own module and registers itself.

    samza-expand plan | init-job | status | stop | demo     the commands of a user and operator
    samza-expand dev broker | apache-kafka | spark-standalone | spark-kafka-jars
                                                            tools for tests and development

The development tools were top-level commands before (`samza-expand dev-broker`, ...): those
names still work, hidden from the help, with a note naming the new spelling.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

from airflow_samza_expand import __version__

# Module that defines each subcommand's `register(subparsers)`; imported lazily so that
# `samza-expand plan` never pays for Spark or the broker.
SUBCOMMAND_MODULES: dict[str, str] = {
    "plan": "airflow_samza_expand.core._cli_plan",
    "init-job": "airflow_samza_expand._protocol.init_job",
    "status": "airflow_samza_expand._protocol.status_cli",
    "stop": "airflow_samza_expand._protocol.status_cli",
    "demo": "airflow_samza_expand._demo.cli",
}
# `samza-expand dev <name>`: the name each module registers -> its name in the group.
DEV_MODULES: dict[str, str] = {
    "dev-broker": "airflow_samza_expand._testing.cli",
    "apache-kafka": "airflow_samza_expand._testing.cli_engines",
    "spark-standalone": "airflow_samza_expand._testing.spark_standalone",
    "spark-kafka-jars": "airflow_samza_expand._testing.spark_kafka",
}
DEV_NAMES: dict[str, str] = {"dev-broker": "broker"}
DEV_HELP = "tools for tests and development: a Kafka broker, Apache Kafka, Spark standalone"


class _Registrar:
    """The `subparsers` a module's ``register`` is handed: renames its commands (`names`),
    hides them from the help (`hidden`: the old top-level spellings), and skips every command
    but `only` (each other name gets a light placeholder, so a command imports one module)."""

    def __init__(
        self,
        action: Any,
        names: dict[str, str] | None = None,
        *,
        hidden: bool = False,
        only: str | None = None,
    ) -> None:
        self.action, self.names, self.hidden, self.only = action, names or {}, hidden, only
        self.added: set[str] = set()

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        shown = self.names.get(name, name)
        if self.hidden:
            kwargs.pop("help", None)  # a parser added without help is not listed
            new = f"samza-expand dev {DEV_NAMES.get(name, name)}"
            kwargs["description"] = f"(old spelling of {new}) {kwargs.get('description') or ''}"
        self.added.add(shown)
        parser = self.action.add_parser(shown, **kwargs)
        if self.hidden:
            parser.set_defaults(_renamed=new)
        return parser

    def register(self, module_name: str, names: list[str]) -> None:
        """``module.register(self)``, or placeholders for `names` when none of them is `only`."""
        if self.only is not None and self.only not in [self.names.get(n, n) for n in names]:
            for name in names:
                shown = self.names.get(name, name)
                if shown not in self.added:
                    self.added.add(shown)
                    extra = {} if self.hidden else {"help": f"(see samza-expand {shown} --help)"}
                    self.action.add_parser(shown, **extra)
            return
        importlib.import_module(module_name).register(self)


def build_parser(only: str | None = None, dev_only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with `only` (a command name) only that command's module is imported
    (`dev_only`: the same inside ``dev``)."""
    parser = argparse.ArgumentParser(
        prog="samza-expand",
        description=(
            "Expand the Kafka input topics of a stateful stream job, keeping state and order."
        ),
        epilog="`samza-expand COMMAND --help` describes each command.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    top = _Registrar(subparsers, only=only)
    modules: dict[str, list[str]] = {}
    for name, module_name in SUBCOMMAND_MODULES.items():
        modules.setdefault(module_name, []).append(name)
    for module_name, names in modules.items():
        top.register(module_name, names)
    dev = subparsers.add_parser("dev", help=DEV_HELP, description=DEV_HELP)
    dev_sub = dev.add_subparsers(dest="dev_command", metavar="TOOL", required=True)
    group = _Registrar(dev_sub, DEV_NAMES, only=dev_only if only == "dev" else "")
    hidden = _Registrar(subparsers, hidden=True, only=only)
    for name, module_name in DEV_MODULES.items():
        group.register(module_name, [name])
        hidden.register(module_name, [name])
    return parser


def _words(argv: list[str]) -> list[str]:
    return [a for a in argv if not a.startswith("-")]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    words = _words(argv)
    command = words[0] if words else None
    known = {*SUBCOMMAND_MODULES, *DEV_MODULES, "dev"}
    dev_only = words[1] if command == "dev" and len(words) > 1 else None
    parser = build_parser(only=command if command in known else None, dev_only=dev_only)
    args = parser.parse_args(argv)
    renamed = getattr(args, "_renamed", None)
    if renamed:
        print(f"note: samza-expand {command} is now {renamed}", file=sys.stderr)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["build_parser", "main"]
