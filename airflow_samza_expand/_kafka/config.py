"""librdkafka client settings from arguments, a key=value file and overrides; redaction.

Secrets never reach a log line or an error message: log `redact(config)`, never the config itself.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from airflow_samza_expand.core._secrets import (  # one implementation, re-exported here
    REDACTED,
    SECRET_KEY_PATTERNS,
    is_secret_key,
    redact,
)


def _as_setting(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _setting_name(name: str) -> str:
    """`security_protocol` -> `security.protocol` (librdkafka names use dots, never underscores)."""
    return name if "." in name else name.replace("_", ".")


def read_config_file(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read librdkafka settings from a file of `key=value` lines (`#` and `!` start comments).

    Errors name the file and line number, never the line text (it may hold a secret).
    """
    settings: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError as exc:
        raise ValueError(
            f"cannot read Kafka client config file {os.fspath(path)!r}: {exc.strerror} - "
            "pass an existing, readable file of key=value lines"
        ) from None
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ValueError(
                f"{os.fspath(path)}:{number}: not a key=value line - write one librdkafka "
                "setting per line, e.g. security.protocol=SASL_SSL"
            )
        settings[key.strip()] = value.strip()
    return settings


def client_config(
    bootstrap_servers: str | None = None,
    config_file: str | None = None,
    **overrides: Any,
) -> dict[str, str]:
    """Return a librdkafka configuration dict (all values strings).

    Precedence, lowest first: `config_file` (key=value lines), `bootstrap_servers`, `overrides`.
    Override names may use dots (`**{"security.protocol": "SSL"}`) or underscores
    (`security_protocol="SSL"`); booleans become "true"/"false"; `None` values are dropped.
    Raises ValueError when no `bootstrap.servers` results.
    """
    config: dict[str, str] = {}
    if config_file:
        config.update(read_config_file(config_file))
    if bootstrap_servers:
        config["bootstrap.servers"] = bootstrap_servers
    for name, value in overrides.items():
        if value is not None:
            config[_setting_name(name)] = _as_setting(value)
    if not config.get("bootstrap.servers", "").strip():
        raise ValueError(
            "no Kafka bootstrap servers configured - pass bootstrap_servers='host:9092', "
            "or set bootstrap.servers in the config file / connection extra"
        )
    return config


# librdkafka's own log lines (`%6|...|BGQUEUE|...`) arrive here, not on stderr. confluent-kafka
# maps the syslog level: 0-2 CRITICAL, 3 ERROR, 4 WARNING, 5-6 INFO, 7 DEBUG.
LIBRDKAFKA_LOGGER = logging.getLogger("airflow_samza_expand.librdkafka")


def with_logger(config: Mapping[str, Any]) -> dict[str, Any]:
    """`config` plus confluent-kafka's `logger` setting (kept if one is set already).

    Only for constructing a client (`_kafka.clients`): the result holds a Logger object, so it
    is never serialised (JSON, records, files, command lines); keep configs logger-free.
    """
    return {**config, "logger": config.get("logger") or LIBRDKAFKA_LOGGER}


def bootstrap_of(config: Mapping[str, Any]) -> str:
    """The bootstrap servers of a config (for error messages), or `<unset>`."""
    return str(config.get("bootstrap.servers") or config.get("metadata.broker.list") or "<unset>")


__all__ = [
    "LIBRDKAFKA_LOGGER",
    "REDACTED",
    "SECRET_KEY_PATTERNS",
    "bootstrap_of",
    "client_config",
    "is_secret_key",
    "read_config_file",
    "redact",
    "with_logger",
]
