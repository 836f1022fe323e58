"""Which keys hold secrets, their redaction, and the refusal to persist them.

One implementation for the project: `_kafka.config` re-exports `is_secret_key` and `redact`,
and every coordinator store refuses a record holding a secret (`refuse_secrets`).
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Mapping
from typing import Any

from airflow_samza_expand.core.errors import SecretValueError

REDACTED = "***"

# Keys whose values are secrets (matched case-insensitively as shell-style patterns).
SECRET_KEY_PATTERNS: tuple[str, ...] = (
    "*password*",
    "*secret*",
    "sasl.*",
    "*token*",
    "*credential*",
    "ssl.key.pem",
    "ssl.keystore.key*",
    "ssl_key",
)


# the patterns as one expression, and the verdict per key remembered: a coordinator record is
# checked whole at every construction, and its keys (topics, partitions, step names) repeat
_SECRET_KEY = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in SECRET_KEY_PATTERNS))


@functools.lru_cache(maxsize=8192)
def is_secret_key(key: str) -> bool:
    """True when `key` names a secret setting (password, secret, token, SASL, private key)."""
    return _SECRET_KEY.match(key.lower()) is not None


def redact(config: Mapping[str, Any]) -> dict[str, Any]:
    """Copy of `config` with every secret value replaced by `***` (safe to log)."""
    return {key: (REDACTED if is_secret_key(str(key)) else value) for key, value in config.items()}


def secret_paths(doc: Any, path: str = "") -> list[str]:
    """Paths (``a.b[2].c``) of values under secret-looking keys in a JSON-like document.

    Only text is a secret: a value that is `REDACTED` or empty is none, and numbers or maps
    under such a key are not either - topic names are keys too (``{"password-resets": 4}``).
    """
    found: list[str] = []
    if not _holds_secret(doc):  # the common case, without building a path per value
        return found
    if isinstance(doc, Mapping):
        for key, value in doc.items():
            where = f"{path}.{key}" if path else str(key)
            if is_secret_key(str(key)) and _is_text(value) and value not in (REDACTED, ""):
                found.append(where)
            else:
                found.extend(secret_paths(value, where))
    elif isinstance(doc, list | tuple):
        for index, value in enumerate(doc):
            found.extend(secret_paths(value, f"{path}[{index}]"))
    return found


_SCALARS = (str, bytes, int, float, type(None))


def _holds_secret(doc: Any) -> bool:
    """Whether `secret_paths` finds anything in `doc` (the same walk, no paths; scalars are
    passed over before the slower check for any Mapping)."""
    if isinstance(doc, _SCALARS):
        return False
    if isinstance(doc, Mapping):
        for key, value in doc.items():
            if is_secret_key(str(key)) and _is_text(value) and value not in (REDACTED, ""):
                return True
            if not isinstance(value, _SCALARS) and _holds_secret(value):
                return True
        return False
    if isinstance(doc, list | tuple):
        return any(not isinstance(v, _SCALARS) and _holds_secret(v) for v in doc)
    return False


def _is_text(value: Any) -> bool:
    return isinstance(value, str | bytes)


def refuse_secrets(doc: Any, what: str) -> None:
    """SecretValueError naming the paths (never the values) if `doc` holds a secret."""
    found = secret_paths(doc)
    if found:
        raise SecretValueError(
            f"{what} holds values under secret-looking keys ({', '.join(found[:10])}); secrets "
            "are never written to the coordinator - pass them through a connection or the "
            f"environment, or redact them (replace the value by {REDACTED!r}) first"
        )


__all__ = [
    "REDACTED",
    "SECRET_KEY_PATTERNS",
    "is_secret_key",
    "redact",
    "refuse_secrets",
    "secret_paths",
]
