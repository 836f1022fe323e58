"""`samza-expand` command line: each subcommand lives in its own module and registers itself.

    samza-expand plan | init-job | status | stop | demo     the commands of a user and operator
    samza-expand dev broker | apache-kafka | spark-standalone | spark-kafka-jars
                                                            tools for tests and development
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib
import re
import sys
from typing import Any, NoReturn

from airflow_samza_expand import __version__

# Module that defines each subcommand's `register(subparsers)`; imported lazily so that
# `samza-expand plan` never pays for Spark or the broker.
SUBCOMMAND_MODULES: dict[str, str] = {
    "plan": "airflow_samza_expand._protocol.cli.plan",
    "init-job": "airflow_samza_expand._protocol.cli.init_job",
    "status": "airflow_samza_expand._protocol.cli.status",
    "stop": "airflow_samza_expand._protocol.cli.status",
    "demo": "airflow_samza_expand._demo.cli",
}
# Module that defines each `samza-expand dev <name>` tool's `register(subparsers)`.
DEV_MODULES: dict[str, str] = {
    "broker": "airflow_samza_expand._testing.cli",
    "apache-kafka": "airflow_samza_expand._testing.cli_engines",
    "spark-standalone": "airflow_samza_expand._testing.spark_standalone",
    "spark-kafka-jars": "airflow_samza_expand._testing.spark_kafka",
}
DEV_HELP = "tools for tests and development: a Kafka broker, Apache Kafka, Spark standalone"


_INVALID_CHOICE = re.compile(r"argument (\S+): invalid choice: '([^']*)'")


class _Parser(argparse.ArgumentParser):
    """Bad input in one line naming the fix, ``samza-expand CMD: error: WHAT (see samza-expand
    CMD --help)``, exit 2, instead of argparse's usage block; a mistyped command lists the
    commands in the help (`public`). Subcommands' parsers are of this class too (argparse
    builds them with the parent's class). A flag has one spelling: no abbreviation of it
    (``--job`` is not ``--job-name``)."""

    public: tuple[str, ...] = ()  # the commands its --help lists (set on a parser with some)
    commands: dict[str, argparse.ArgumentParser] | None = None  # its subcommands' parsers

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        mistyped = _INVALID_CHOICE.match(message)
        if mistyped and self.public:
            name = mistyped.group(2)
            close = difflib.get_close_matches(name, self.public, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            message = f"no command {name!r} - {hint}choose from {', '.join(self.public)}"
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _Registrar:
    """The `subparsers` a module's ``register`` is handed: it skips every command but `only`
    (each other name gets a light placeholder, so a command imports one module)."""

    def __init__(self, action: Any, *, only: str | None = None) -> None:
        self.action, self.only = action, only
        self.added: set[str] = set()

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        self.added.add(name)
        return self.action.add_parser(name, **kwargs)

    def register(self, module_name: str, names: list[str]) -> None:
        """``module.register(self)``, or placeholders for `names` when none of them is `only`."""
        if self.only is not None and self.only not in names:
            for name in names:
                if name not in self.added:
                    self.added.add(name)
                    self.action.add_parser(name, help=f"(see samza-expand {name} --help)")
            return
        importlib.import_module(module_name).register(self)


def build_parser(only: str | None = None, dev_only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with `only` (a command name) only that command's module is imported
    (`dev_only`: the same inside ``dev``)."""
    parser = _Parser(
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
    parser.public, parser.commands = (*SUBCOMMAND_MODULES, "dev"), subparsers.choices
    dev = subparsers.add_parser("dev", help=DEV_HELP, description=DEV_HELP)
    dev.public = tuple(DEV_MODULES)
    dev_sub = dev.add_subparsers(dest="dev_command", metavar="TOOL", required=True)
    dev.commands = dev_sub.choices
    group = _Registrar(dev_sub, only=dev_only if only == "dev" else "")
    for name, module_name in DEV_MODULES.items():
        group.register(module_name, [name])
    return parser


def _words(argv: list[str]) -> list[str]:
    return [a for a in argv if not a.startswith("-")]


def _command_parser(parser: _Parser, args: argparse.Namespace) -> _Parser:
    """The parser of the (sub)command `args` ran."""
    for dest in ("command", "dev_command"):
        commands = parser.commands or {}
        name = getattr(args, dest, None)
        if name in commands and isinstance(commands[name], _Parser):
            parser = commands[name]  # type: ignore[assignment]
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    words = _words(argv)
    command = words[0] if words else None
    known = {*SUBCOMMAND_MODULES, "dev"}
    dev_only = words[1] if command == "dev" and len(words) > 1 else None
    parser = build_parser(only=command if command in known else None, dev_only=dev_only)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # refused by the command's own parser, which names its --help
        _command_parser(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    if getattr(args, "kafka_config_id", None):
        try:
            args.connection_config = connection_config(args.kafka_config_id)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    return int(args.func(args) or 0)


def connection_config(conn_id: str) -> dict[str, Any]:
    """The librdkafka config of the provider's Airflow connection `conn_id`, read as the tasks
    read it (the provider's hook: Airflow is imported only here); ValueError naming the fix.
    Nothing of it is printed (its secrets stay in memory)."""
    try:
        from airflow_samza_expand.airflow._compat import kafka_connection_config
        from airflow_samza_expand.airflow.hooks import SamzaExpandKafkaHook
    except ImportError as exc:
        raise ValueError(
            f"--kafka-config-id reads an Airflow connection, and Airflow cannot be imported "
            f"({exc}) - install the provider with Airflow, or pass --bootstrap-servers"
        ) from None
    with contextlib.suppress(ImportError):  # what Airflow logs goes to stderr, not stdout
        from airflow.sdk.log import configure_logging  # (the command's output, e.g. --json)

        configure_logging(output=sys.stderr)
    try:  # as the hook's client_config, without its log line
        return kafka_connection_config(SamzaExpandKafkaHook(kafka_config_id=conn_id))
    except Exception as exc:  # a missing connection is Airflow's own NotFound error
        name = type(exc).__name__
        raise ValueError(
            f"--kafka-config-id {conn_id}: {name}: {exc} - define the connection (airflow "
            f"connections add, or AIRFLOW_CONN_{conn_id.upper()}) with bootstrap.servers in "
            "its extra"
        ) from None


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["build_parser", "main"]
