"""Detached launch of a long-running command (a streaming ``spark-submit`` on a local master).

No Airflow import: the submit and standby operators, the UI (a launch's log tail), the demo and
the tests use it alike.

Nothing waits for the command: the caller gets a handle (pid, process group, log path, state
file, host) and returns at once, so no Airflow worker slot is held while the stream job runs.

The pid and the state file mean something on the launch's host only (`this_host`), to the
process that launched (its start-up check, the demo): on any other host `is_running` decides
from the launch time alone (a launch younger than its window may still be starting). A later
task - the submit and standby steps' retries - decides from the expansion record and the
processors' heartbeats (`_protocol.job.launches`), never from a pid or a state file, on any host.

``launch(cmd, log_path=...)`` runs ``python -m airflow_samza_expand._protocol.job.launch`` as a
short *launcher*, which starts a *supervisor* in a new session and exits once the supervisor has
started the command. The supervisor owns the command (its child, same process group), writes its
pid to the state file, reaps it and records its exit code - so the caller can tell "still
running" from "exited with 1" without being its parent, and no zombie is left behind.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

STATE_SUFFIX = ".state.json"
HOST_ENV = "SAMZA_EXPAND_HOST"  # the name this worker gives its launches (default: host name)
# how long a launch may take to come up (Spark's start, the first heartbeat) before a task on
# another host takes it for failed
LAUNCH_WINDOW_S = 300.0
_MODULE = "airflow_samza_expand._protocol.job.launch"  # run with -m as launcher and supervisor


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def this_host() -> str:
    """The name of this host in launch handles: ``$SAMZA_EXPAND_HOST``, else the host name."""
    return os.environ.get(HOST_ENV) or socket.gethostname()


def on_this_host(handle: Mapping[str, Any]) -> bool:
    """Whether ``handle`` was launched on this host (a handle without a host: an older launch,
    taken as this host's as before)."""
    host = handle.get("host")
    return not host or str(host) == this_host()


def launch_age_s(handle: Mapping[str, Any], now: datetime | None = None) -> float | None:
    """Seconds since the launch (``launched_at`` or ``started_at``), None if unknown."""
    from airflow_samza_expand.core._clock import parse_iso

    try:
        started = parse_iso(str(handle.get("launched_at") or handle.get("started_at") or ""))
    except ValueError:
        return None
    return ((now or datetime.now(UTC)) - started).total_seconds()


def read_state(state_path: str) -> dict[str, Any] | None:
    """The supervisor's state file, or None while it does not exist (or is half written)."""
    try:
        with open(state_path, encoding="utf-8") as handle:
            return json.load(handle)
    except (FileNotFoundError, ValueError):
        return None


def _write_state(state_path: str, state: Mapping[str, Any]) -> None:
    tmp = f"{state_path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(dict(state), handle, sort_keys=True)
    os.replace(tmp, state_path)


def launcher_args(
    log_path: str, *, timeout_s: float = 60.0, secret_keys: Sequence[str] = ()
) -> list[str]:
    """The launcher's command line up to ``--`` (the command follows). The state file's
    ``command`` shows the values of ``--conf`` keys in `secret_keys` (and of keys that look
    secret) as ``***``."""
    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    state_path = log_path + STATE_SUFFIX
    if os.path.exists(state_path):
        os.unlink(state_path)
    args = [sys.executable, "-m", _MODULE, "--state", state_path]
    args += ["--log", log_path, "--timeout", str(timeout_s)]
    for key in secret_keys:
        args += ["--secret-key", key]
    return [*args, "--"]


def launch(
    cmd: Sequence[str],
    *,
    log_path: str,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    timeout_s: float = 60.0,
    secret_keys: Sequence[str] = (),
) -> dict[str, Any]:
    """Start ``cmd`` detached; return its handle ``{pid, pgid, supervisor_pid, log_path,
    state_path, command, started_at}`` once it runs. Output goes to ``log_path``."""
    launcher = [*launcher_args(log_path, timeout_s=timeout_s, secret_keys=secret_keys), *cmd]
    state_path = log_path + STATE_SUFFIX
    done = subprocess.run(
        launcher,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=timeout_s + 10,
        check=False,
    )
    state = read_state(state_path)
    if done.returncode != 0 or state is None or "pid" not in state:
        raise RuntimeError(
            f"could not start {cmd[0]!r} detached (launcher exit {done.returncode}): "
            f"{done.stderr.decode(errors='replace')[-2000:]} - see {log_path}"
        )
    return state


def is_running(handle: Mapping[str, Any]) -> bool:
    """True while the command of ``handle`` has not exited (per its supervisor). A launch of
    another host counts as running while it is younger than its window (``window_s``, default
    `LAUNCH_WINDOW_S`): its pid means nothing here, and the processors' heartbeats tell once
    it is up."""
    if not on_this_host(handle):
        age = launch_age_s(handle)
        window = float(handle.get("window_s") or LAUNCH_WINDOW_S)
        return age is not None and age < window
    state = read_state(str(handle["state_path"])) or dict(handle)
    if state.get("exit_code") is not None:
        return False
    try:
        os.kill(int(state["supervisor_pid"]), 0)
    except (ProcessLookupError, PermissionError):
        return False
    return _not_zombie(int(state["supervisor_pid"]))


def _not_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return True  # no /proc: trust kill(0)


def exit_code(handle: Mapping[str, Any]) -> int | None:
    """The command's exit code once it has exited, else None (always None for a launch of
    another host: its state file is not here)."""
    if not on_this_host(handle) or not handle.get("state_path"):
        return None
    state = read_state(str(handle["state_path"])) or {}
    code = state.get("exit_code")
    return None if code is None else int(code)


def terminate(handle: Mapping[str, Any], *, timeout_s: float = 30.0) -> int | None:
    """SIGTERM the handle's process group, SIGKILL after ``timeout_s``; returns the exit code."""
    pgid = int(handle["pgid"])
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return exit_code(handle)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not is_running(handle):
            return exit_code(handle)
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    return exit_code(handle)


def tail(path: str, chars: int = 3000) -> str:
    """The last ``chars`` characters of a log file ('' if missing)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - chars))
            return handle.read().decode(errors="replace")
    except FileNotFoundError:
        return ""


# -- launcher and supervisor (this module run with -m) -----------------------------------------


def _supervise(args: argparse.Namespace) -> int:
    with open(args.log, "ab") as log:
        child = subprocess.Popen(args.cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    state = {
        "pid": child.pid,
        "pgid": os.getpgid(0),
        "supervisor_pid": os.getpid(),
        "log_path": os.path.abspath(args.log),
        "state_path": os.path.abspath(args.state),
        "command": _shown(args.cmd, args.secret_key),
        "started_at": _now(),
        "host": this_host(),
        "exit_code": None,
    }
    _write_state(args.state, state)

    def forward(signum: int, _frame: Any) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    code = child.wait()
    state.update(exit_code=code, ended_at=_now())
    _write_state(args.state, state)
    return 0


def _shown(cmd: Sequence[str], secret_keys: Sequence[str]) -> list[str]:
    """The command as the state file shows it: secret ``--conf`` values as ``***``."""
    from airflow_samza_expand.core._secrets import REDACTED, is_secret_key

    shown = []
    for arg in cmd:
        key, eq, _ = str(arg).partition("=")
        shown.append(
            f"{key}={REDACTED}" if eq and (key in secret_keys or is_secret_key(key)) else arg
        )
    return shown


def _launch(args: argparse.Namespace) -> int:
    supervisor = subprocess.Popen(
        [sys.executable, "-m", __spec__.name if __spec__ else _MODULE]
        + ["--supervise", "--state", args.state, "--log", args.log]
        + [arg for key in args.secret_key for arg in ("--secret-key", key)]
        + ["--", *args.cmd],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        state = read_state(args.state)
        if state and "pid" in state:
            return 0
        if supervisor.poll() is not None:
            print(f"supervisor exited with {supervisor.returncode}", file=sys.stderr)
            return 1
        time.sleep(0.05)
    print(f"command did not start within {args.timeout} s", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {_MODULE}")
    parser.add_argument("--state", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--supervise", action="store_true")
    parser.add_argument("--secret-key", action="append", default=[])
    parser.add_argument("cmd", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.cmd and args.cmd[0] == "--":
        args.cmd = args.cmd[1:]
    if not args.cmd:
        parser.error("no command given after --")
    return _supervise(args) if args.supervise else _launch(args)


if __name__ == "__main__":
    sys.exit(main())
