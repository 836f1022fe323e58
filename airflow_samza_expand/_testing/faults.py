"""Fault injection for the development broker (test/dev tool only).

Broker side, `FaultTable` holds rules per Kafka API name; the connection loop asks it for the
rule to apply to each request. Test side, `FaultClient` drives a running broker subprocess over
its loopback control port with one JSON object per line:

    {"op": "inject", "api": "CreatePartitions", "kind": "apply_then_timeout", "times": 1}
    {"op": "clear"}            {"op": "list"}            {"op": "ping"}

Kinds:
* ``delay``               - wait ``delay_s`` seconds, then handle normally.
* ``error``               - do not apply; answer with Kafka error ``error`` (code or name, e.g.
                            ``"REQUEST_TIMED_OUT"``) in every error field of the response.
* ``drop_connection``     - do not apply; close the client's connection.
* ``apply_then_timeout``  - apply the request but never send the response (the client times out).
``delay_s`` also delays the other kinds. ``times`` is how many requests the rule hits (None: all).
"""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import asdict, dataclass
from typing import Any

FAULT_KINDS = ("delay", "error", "drop_connection", "apply_then_timeout")


class FaultError(ValueError):
    """A fault rule the broker refused (unknown API, kind or error code)."""


@dataclass
class FaultRule:
    api: str
    kind: str
    times: int | None = 1
    delay_s: float = 0.0
    error_code: int | None = None
    hits: int = 0


class FaultTable:
    """Broker-side rules; first matching rule with hits left wins."""

    def __init__(
        self, api_names: set[str], error_codes: dict[str, int], error_capable: set[str]
    ) -> None:
        self._api_names = api_names
        self._error_codes = error_codes
        self._error_capable = error_capable
        self._rules: list[FaultRule] = []
        self._lock = threading.Lock()

    def inject(
        self,
        api: str,
        kind: str,
        times: int | None = 1,
        delay_s: float = 0.0,
        error: int | str | None = None,
    ) -> FaultRule:
        if api not in self._api_names:
            raise FaultError(f"unknown api {api!r} - use one of {sorted(self._api_names)}")
        if kind not in FAULT_KINDS:
            raise FaultError(f"unknown fault kind {kind!r} - use one of {list(FAULT_KINDS)}")
        if times is not None and times < 1:
            raise FaultError(f"times must be >= 1 or None, got {times}")
        if delay_s < 0:
            raise FaultError(f"delay_s must be >= 0, got {delay_s}")
        code = None
        if kind == "error":
            if api not in self._error_capable:
                raise FaultError(
                    f"error injection is not available for {api} - use drop_connection or delay"
                )
            code = self._resolve_error(error)
        rule = FaultRule(api=api, kind=kind, times=times, delay_s=delay_s, error_code=code)
        with self._lock:
            self._rules.append(rule)
        return rule

    def _resolve_error(self, error: int | str | None) -> int:
        if isinstance(error, bool) or error is None:
            raise FaultError("kind 'error' needs error=<Kafka error code or name>")
        if isinstance(error, int):
            if error not in self._error_codes.values():
                raise FaultError(f"unknown Kafka error code {error}")
            return error
        name = str(error).lower()
        if name not in self._error_codes:
            raise FaultError(f"unknown Kafka error name {error!r} - e.g. REQUEST_TIMED_OUT")
        return self._error_codes[name]

    def clear(self, api: str | None = None) -> None:
        with self._lock:
            self._rules = [r for r in self._rules if api is not None and r.api != api]

    def take(self, api: str) -> FaultRule | None:
        with self._lock:
            for rule in self._rules:
                if rule.api == api and (rule.times is None or rule.hits < rule.times):
                    rule.hits += 1
                    return rule
        return None

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return [asdict(r) for r in self._rules]

    def handle_command(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """Execute one control-channel command; never raises."""
        op = cmd.get("op")
        try:
            if op == "inject":
                rule = self.inject(
                    cmd.get("api", ""),
                    cmd.get("kind", ""),
                    cmd.get("times", 1),
                    float(cmd.get("delay_s", 0.0)),
                    cmd.get("error"),
                )
                return {"ok": True, "rule": asdict(rule)}
            if op == "clear":
                self.clear(cmd.get("api"))
                return {"ok": True}
            if op == "list":
                return {"ok": True, "rules": self.snapshot()}
            if op == "ping":
                return {"ok": True}
            return {"ok": False, "error": f"unknown op {op!r} - use inject, clear, list or ping"}
        except (FaultError, TypeError, ValueError) as exc:
            return {"ok": False, "error": str(exc)}


class FaultClient:
    """Test-side handle on a broker's fault table (`dev_broker.faults`)."""

    def __init__(self, host: str, control_port: int, timeout_s: float = 10.0) -> None:
        self.host = host
        self.control_port = control_port
        self.timeout_s = timeout_s

    def _call(self, cmd: dict[str, Any]) -> dict[str, Any]:
        with socket.create_connection((self.host, self.control_port), self.timeout_s) as sock:
            sock.sendall(json.dumps(cmd).encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                buf += chunk
        reply = json.loads(buf)
        if not reply.get("ok"):
            raise FaultError(reply.get("error", "fault command failed"))
        return reply

    def inject(
        self,
        api: str,
        kind: str,
        *,
        times: int | None = 1,
        delay_s: float = 0.0,
        error: int | str | None = None,
    ) -> dict[str, Any]:
        """Add a rule; returns it as the broker stored it. Raises FaultError if refused."""
        return self._call(
            {
                "op": "inject",
                "api": api,
                "kind": kind,
                "times": times,
                "delay_s": delay_s,
                "error": error,
            }
        )["rule"]

    def clear(self, api: str | None = None) -> None:
        """Remove all rules, or those of one API."""
        self._call({"op": "clear", "api": api})

    def rules(self) -> list[dict[str, Any]]:
        """Current rules with their hit counts."""
        return self._call({"op": "list"})["rules"]

    def hits(self, api: str) -> int:
        return sum(r["hits"] for r in self.rules() if r["api"] == api)
