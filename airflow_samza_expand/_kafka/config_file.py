"""Handing a Kafka configuration with secrets to the PySpark job without putting them on its
command line: an owner-only (0600) `key=value` file passed as `--kafka-config FILE`.

    path = write_config_file(hook.client_config(), directory=log_dir)   # 0600, new name
    args = [*job_args, *job_kafka_args(path)]
    check_free_of_secrets(args, config)                                 # SecretValueError

The job reads the file with `_kafka.config.read_config_file` (the driver) and its executors get
only the path (`spark._source` options). A Spark argument list, `spark.*` conf or XCom therefore
never holds a password: `ps`, the Spark UI and the Airflow logs show a path.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping
from typing import Any

from airflow_samza_expand._kafka.config import is_secret_key
from airflow_samza_expand.core.errors import SecretValueError

OWNER_ONLY = 0o600


def write_config_file(
    config: Mapping[str, Any], directory: str | os.PathLike[str] | None = None
) -> str:
    """Write the string settings of `config` (callbacks and objects are skipped: a file cannot
    carry them) as `key=value` lines into a new 0600 file in `directory` (created 0700 if
    missing; default the system temp dir); return its path. The file is created with its final
    permissions (never world-readable, not even for a moment)."""
    lines = []
    for key, value in sorted(config.items()):
        if callable(value) or not isinstance(value, str | int | float | bool):
            continue
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if "\n" in text or "\r" in text or "=" in key:
            raise ValueError(
                f"Kafka setting {key!r} cannot be written as one key=value line - "
                "remove line breaks from its value"
            )
        lines.append(f"{key}={text}\n")
    if directory is not None:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    fd, path = tempfile.mkstemp(prefix="kafka-client-", suffix=".properties", dir=directory)
    try:
        os.fchmod(fd, OWNER_ONLY)  # mkstemp creates 0600 already; say so explicitly
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.writelines(lines)
    except BaseException:
        os.unlink(path)
        raise
    return path


def job_kafka_args(path: str) -> list[str]:
    """The job's Kafka arguments: the file only (its bootstrap servers are inside)."""
    return ["--kafka-config", path]


# Under `sasl.*` (redacted everywhere) but no secret: they may appear in arguments.
NOT_SECRET = frozenset({"sasl.mechanism", "sasl.mechanisms", "sasl.username"})


def secret_items(config: Mapping[str, Any]) -> dict[str, str]:
    """The settings of `config` that are secrets (password, JAAS config, key, token ...)."""
    return {
        k: v
        for k, v in config.items()
        if is_secret_key(k) and k.lower() not in NOT_SECRET and isinstance(v, str) and v
    }


def check_free_of_secrets(args: Iterable[str], config: Mapping[str, Any]) -> None:
    """SecretValueError if an argument contains a secret value of `config` (names the key)."""
    listed = [str(a) for a in args]
    for key, value in secret_items(config).items():
        if any(value in arg for arg in listed):
            raise SecretValueError(
                f"the Spark argument list would contain the value of {key!r} - pass the "
                "Kafka settings as --kafka-config FILE (kafka.config_file.write_config_file)"
            )


__all__ = [
    "OWNER_ONLY",
    "check_free_of_secrets",
    "job_kafka_args",
    "secret_items",
    "write_config_file",
]
