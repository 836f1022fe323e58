"""A user job supervised as a cluster manager runs it (test tooling): the command is started
again each time it exits - always, or on failure only (a non-zero exit or a signal) - after a
back-off that doubles while the job keeps dying young, as Kubernetes' ``restartPolicy``, YARN's
``maxAppAttempts`` or a Databricks job's retries do. What the driver does on each exit code is
the product's (docs/operations.md); this only restarts it.

    python -m airflow_samza_expand._testing.supervisor --state-dir DIR --policy on-failure \\
        --backoff-s 1 -- spark-submit ... user_job.py ...

The supervisor and every attempt share one process group (started with ``start_new_session``
by `Supervised.start`): ``os.killpg(pid, SIGKILL)`` stops it all. In ``--state-dir``:
``child.pid`` (the running attempt), ``exits.log`` (one line per exit: ``attempt=N pid=P
code=C seconds=S next=restart|end delay=D``; a signal is a negative code) and
``attempt-N.log`` (each attempt's output).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

POLICIES = ("always", "on-failure")
EXIT_LINE = re.compile(r"attempt=(\d+) pid=(\d+) code=(-?\d+) seconds=\S+ next=(\w+)")


def should_restart(policy: str, code: int) -> bool:
    """``always`` restarts every exit; ``on-failure`` every exit but 0."""
    if policy not in POLICIES:
        raise ValueError(f"unknown restart policy {policy!r}: use one of {', '.join(POLICIES)}")
    return policy == "always" or code != 0


def backoff(base_s: float, max_s: float, young_exits: int) -> float:
    """The delay before the next attempt: ``base_s`` doubled for each exit in a row of an
    attempt that died young (before ``--stable-s``), at most ``max_s``."""
    return min(max_s, base_s * 2 ** max(0, young_exits - 1))


def supervise(command: Sequence[str], state_dir: Path, *, policy: str, backoff_s: float = 1.0,
              max_backoff_s: float = 30.0, stable_s: float = 60.0,
              max_restarts: int | None = None) -> int:  # fmt: skip
    """Run ``command`` and start it again when it exits (see the module docstring); returns
    the last attempt's exit code once the policy (or ``max_restarts``) ends it."""
    should_restart(policy, 0)  # the policy named wrong: the error, before anything starts
    state_dir.mkdir(parents=True, exist_ok=True)
    exits = state_dir / "exits.log"
    attempt, young = 0, 0
    while True:
        attempt += 1
        with open(state_dir / f"attempt-{attempt}.log", "wb") as out:
            started = time.monotonic()
            child = subprocess.Popen(list(command), stdout=out, stderr=subprocess.STDOUT)
            (state_dir / "child.pid").write_text(f"{child.pid}\n")
            code = child.wait()
        seconds = time.monotonic() - started
        young = young + 1 if seconds < stable_s else 1
        again = should_restart(policy, code) and (max_restarts is None or attempt <= max_restarts)
        delay = backoff(backoff_s, max_backoff_s, young) if again else 0.0
        with open(exits, "a") as log:
            log.write(f"attempt={attempt} pid={child.pid} code={code} seconds={seconds:.1f} "
                      f"next={'restart' if again else 'end'} delay={delay:g}\n")  # fmt: skip
        print(
            f"supervisor: attempt {attempt} (pid {child.pid}) exited {code}; "
            + (f"restarting in {delay:g} s" if again else "not restarted"),
            flush=True,
        )
        if not again:
            return code if code >= 0 else 128 - code
        time.sleep(delay)


@dataclass(frozen=True)
class Exit:
    attempt: int
    pid: int
    code: int
    restarted: bool


@dataclass
class Supervised:
    """A supervisor process started by `start`: its attempts, exits; kill an attempt; stop."""

    proc: subprocess.Popen
    state_dir: Path

    @classmethod
    def start(cls, command: Sequence[str], state_dir: Path, *, policy: str = "on-failure",
              backoff_s: float = 1.0, max_backoff_s: float = 30.0,
              max_restarts: int | None = None,
              env: Mapping[str, str] | None = None) -> Supervised:  # fmt: skip
        should_restart(policy, 0)
        state_dir.mkdir(parents=True, exist_ok=True)
        args = [sys.executable, "-m", __name__, "--state-dir", str(state_dir), "--policy", policy,
                "--backoff-s", str(backoff_s), "--max-backoff-s", str(max_backoff_s)]  # fmt: skip
        if max_restarts is not None:
            args += ["--max-restarts", str(max_restarts)]
        out = open(state_dir / "supervisor.log", "ab")  # noqa: SIM115 - the child holds it
        try:
            proc = subprocess.Popen([*args, "--", *command], stdout=out, stderr=subprocess.STDOUT,
                                    env=dict(env) if env is not None else None,
                                    start_new_session=True)  # fmt: skip
        finally:
            out.close()
        return cls(proc, state_dir)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def exits(self) -> list[Exit]:
        path = self.state_dir / "exits.log"
        lines = path.read_text().splitlines() if path.exists() else []
        return [Exit(int(m[1]), int(m[2]), int(m[3]), m[4] == "restart")
                for m in map(EXIT_LINE.search, lines) if m]  # fmt: skip

    def child_pid(self) -> int | None:
        """The attempt running now (None between attempts or once ended)."""
        path = self.state_dir / "child.pid"
        if not path.exists() or self.proc.poll() is not None:
            return None
        pid = int(path.read_text())
        return None if any(e.pid == pid for e in self.exits()) else pid

    def attempts(self) -> int:
        """Attempts started so far."""
        return len(list(self.state_dir.glob("attempt-*.log")))

    def kill_attempt(self, sig: int = signal.SIGKILL) -> int:
        """Signal the running attempt and every process under it (a driver's JVM and its
        Python workers), not the supervisor; returns the attempt's pid."""
        pid = self.child_pid()
        if pid is None:
            raise RuntimeError(f"no attempt is running; {self.state_dir / 'exits.log'}")
        for each in [pid, *descendants(pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(each, sig)
        return pid

    def wait_attempts(self, n: int, timeout_s: float = 120.0) -> None:
        """Until attempt ``n`` has started."""
        deadline = time.monotonic() + timeout_s
        while self.attempts() < n or self.child_pid() is None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the supervisor ended before attempt {n} started; "
                                   f"{self.state_dir / 'exits.log'}")  # fmt: skip
            if time.monotonic() > deadline:
                raise TimeoutError(f"attempt {n} did not start in {timeout_s:.0f} s")
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGKILL the whole process group: the supervisor and its running attempt."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (children first), from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="supervisor", description=__doc__.split("\n\n")[0])
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--policy", choices=POLICIES, default="on-failure")
    parser.add_argument("--backoff-s", type=float, default=1.0)
    parser.add_argument("--max-backoff-s", type=float, default=30.0)
    parser.add_argument("--stable-s", type=float, default=60.0,
                        help="an attempt that ran this long resets the back-off")  # fmt: skip
    parser.add_argument("--max-restarts", type=int, default=None)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to supervise: give it after --")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    return supervise(command, args.state_dir, policy=args.policy, backoff_s=args.backoff_s,
                     max_backoff_s=args.max_backoff_s, stable_s=args.stable_s,
                     max_restarts=args.max_restarts)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
