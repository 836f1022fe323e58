"""Helpers of the JVM launchers (Apache Kafka, Spark standalone): free loopback ports, a child
that dies with its parent, polling a condition, stopping a process by pid, Maven fetches into
the user cache (test/dev tools only)."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1


EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
SERVER_PORTS = 10_000  # how many ports below the ephemeral range free_port draws from


def ephemeral_low(path: str = EPHEMERAL_RANGE_FILE) -> int:
    """The lowest port the kernel gives an outgoing connection (32768 when unknown)."""
    try:
        with open(path, encoding="ascii") as handle:
            return int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now, which the server binds a moment later.

    Drawn below the kernel's ephemeral range: a port the kernel hands out (``bind(0)``) is the
    kind every outgoing connection takes too, and with Kafka clients connecting all the time
    one of them took it before the JVM bound it ("Address already in use"). Random, so two
    test runs starting servers at once rarely draw the same one; a port in use is skipped."""
    low = ephemeral_low()
    first = max(1024, low - SERVER_PORTS)
    for _ in range(100):
        port = random.randrange(first, low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:  # all busy: any port
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_open(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((host, port)) == 0


def die_with_parent() -> None:
    """preexec_fn: SIGTERM this child when the thread that started it exits (Linux's parent
    death signal follows the forking thread, not the process: use `exit_with_parent_hook`)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def exit_with_parent_hook(wanted: bool) -> Callable[[], None] | None:
    """The preexec_fn of a server started by a test tool that should exit with this process:
    `die_with_parent` from the main thread; None from any other thread, whose end would stop
    the server (a Kafka node restarted by a rolling restart in a background thread was
    SIGTERMed, with every node it restarted, when that thread returned). A server started
    from a thread is stopped by its pid (`stop_pid`, the tools' close) and the test session's
    sweep, not by this process's exit."""
    if not wanted:
        return None
    if threading.current_thread() is threading.main_thread():
        return die_with_parent
    log.debug("started from thread %r: no parent death signal (it would fire when the thread "
              "ends); stopped by its pid", threading.current_thread().name)  # fmt: skip
    return None


def wait_until(
    what: str,
    check: Callable[[], Any],
    *,
    timeout_s: float,
    alive: Callable[[], str | None] = lambda: None,
    interval_s: float = 0.2,
) -> Any:
    """Poll ``check()`` until truthy; ``alive()`` returns an error text once the process died."""
    deadline = time.monotonic() + timeout_s
    next_log = time.monotonic() + 10
    while True:
        value = check()
        if value:
            return value
        dead = alive()
        if dead:
            raise RuntimeError(f"{what}: {dead}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        if time.monotonic() > next_log:
            log.info("still waiting for %s", what)
            next_log = time.monotonic() + 10
        time.sleep(interval_s)


def stop_pid(proc: subprocess.Popen | None, what: str, timeout_s: float = 30.0) -> None:
    """SIGTERM ``proc`` (by its pid), SIGKILL it if it is still there after ``timeout_s``."""
    if proc is None or proc.poll() is not None:
        return
    log.info("stopping %s (pid %d)", what, proc.pid)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        log.warning("%s (pid %d) did not stop in %.0fs; killing it", what, proc.pid, timeout_s)
        proc.kill()
        proc.wait()


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/airflow-samza-expand`` (default ``~/.cache/airflow-samza-expand``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "airflow-samza-expand"


def pom_hash(pom: Path) -> str:
    return hashlib.sha256(pom.read_bytes()).hexdigest()[:12]


def maven_copy(pom: Path, target: Path, *, properties: dict[str, str] | None = None) -> Path:
    """``mvn dependency:copy-dependencies`` of ``pom`` into ``target/libs`` once (reused after;
    a lock keeps two concurrent fetches apart). Returns the libs directory."""
    libs = target / "libs"
    done = target / "complete"
    if done.exists():
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError(
            "Maven ('mvn') is not on PATH - install it (apt-get install maven) to fetch "
            f"{pom.name}'s artifacts from Maven Central into {target}"
        )
    target.mkdir(parents=True, exist_ok=True)
    with open(target / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return libs
        shutil.rmtree(libs, ignore_errors=True)
        cmd = [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
               f"-DoutputDirectory={libs}", "-DincludeScope=runtime"]  # fmt: skip
        cmd += [f"-D{k}={v}" for k, v in (properties or {}).items()]
        log.info("fetching %s's artifacts from Maven Central into %s", pom, libs)
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if result.returncode != 0:
            raise RuntimeError(
                f"mvn failed ({result.returncode}) fetching {pom} - is Maven Central reachable? "
                f"output:\n{(result.stdout + result.stderr)[-3000:]}"
            )
        done.write_text(" ".join(cmd) + "\n")
    return libs


class ContextManaged:
    """``with X() as x``: start() on entry, close() on exit."""

    def start(self) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class LaunchedProcess(ContextManaged):
    """A server in one subprocess (`proc`) writing to `log_path`."""

    proc: subprocess.Popen | None
    log_path: Path

    def kill(self) -> None:
        """SIGKILL the server (crash simulation)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
