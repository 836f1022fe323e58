"""Secret-looking Spark settings: redacted before they reach an XCom, a record, a log or a file.

`is_secret` decides per key; the Airflow surface passes Airflow's own secrets masker
(``should_hide_value_for_key``) combined with `core._secrets.is_secret_key`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from airflow_samza_expand.core._secrets import REDACTED, is_secret_key

SecretTest = Callable[[str], bool]


def secret_values(conf: Mapping[str, Any], is_secret: SecretTest = is_secret_key) -> list[str]:
    """The values of `conf` under secret-looking keys (to register with a log masker)."""
    return [str(v) for k, v in conf.items() if is_secret(str(k)) and v not in (None, "")]


def redact_conf(conf: Mapping[str, Any], is_secret: SecretTest = is_secret_key) -> dict[str, Any]:
    """`conf` with the values of secret-looking keys replaced by ``***`` (keys kept)."""
    return {k: (REDACTED if is_secret(str(k)) else v) for k, v in conf.items()}


def redact_command(
    cmd: Sequence[str], secrets: Sequence[str] = (), is_secret: SecretTest = is_secret_key
) -> list[str]:
    """A command line with ``--conf key=value`` values of secret keys, and every literal in
    `secrets`, replaced by ``***``."""
    out: list[str] = []
    for arg in cmd:
        text = str(arg)
        key, eq, _ = text.partition("=")
        if eq and is_secret(key):
            text = f"{key}={REDACTED}"
        for secret in secrets:
            if secret:
                text = text.replace(secret, REDACTED)
        out.append(text)
    return out


def redact_doc(doc: Any, secrets: Sequence[str]) -> Any:
    """A JSON-like document with every literal in `secrets` replaced (XCom / record values)."""
    if isinstance(doc, Mapping):
        return {k: redact_doc(v, secrets) for k, v in doc.items()}
    if isinstance(doc, list | tuple):
        return [redact_doc(v, secrets) for v in doc]
    if isinstance(doc, str):
        for secret in secrets:
            if secret:
                doc = doc.replace(secret, REDACTED)
    return doc


__all__ = ["redact_command", "redact_conf", "redact_doc", "secret_values"]
