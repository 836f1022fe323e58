"""The detached launcher (protocol.launch) with real processes: it returns while the command
runs, terminates it by its handle and records its exit code. And the launch as the expansion
record keeps it (protocol.launches): the submit step decides from the record and the
heartbeats, alike on every host - the launching host's pid and state file included."""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from datetime import timedelta

import pytest
from record_states import walk

from airflow_samza_expand._protocol.job import launch as detached
from airflow_samza_expand._protocol.job import launches
from airflow_samza_expand._protocol.steps.submit import before_submit
from airflow_samza_expand.core._clock import now_iso, to_iso, utc_now
from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._files import FileCoordinatorStore


def _wait(cond, timeout_s=20.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_detached_launch_returns_at_once_and_terminates_by_handle(tmp_path) -> None:
    # The command runs until the test creates `release` (300 s at most): a launch that waited
    # for the command would return only after it exited, and the checks below would fail.
    release = tmp_path / "release"
    waits = (
        "import os, time; print('up', flush=True)\n"
        f"for _ in range(3000):\n    if os.path.exists({str(release)!r}): break\n"
        "    time.sleep(0.1)\n"
    )
    handle = detached.launch([sys.executable, "-c", waits], log_path=str(tmp_path / "job.log"))
    assert not release.exists()
    assert detached.exit_code(handle) is None  # returned while the command still runs
    assert detached.is_running(handle)
    assert handle["pgid"] == handle["supervisor_pid"]  # its own session: killpg ends it all
    assert _wait(lambda: "up" in detached.tail(handle["log_path"]))
    code = detached.terminate(handle, timeout_s=10)
    assert _wait(lambda: not detached.is_running(handle))
    assert code is None or code != 0


def test_detached_launch_records_the_exit_code_of_a_failing_command(tmp_path) -> None:
    handle = detached.launch(
        [sys.executable, "-c", "import sys; print('bad input', file=sys.stderr); sys.exit(2)"],
        log_path=str(tmp_path / "bad.log"),
    )
    assert _wait(lambda: detached.exit_code(handle) is not None)
    assert detached.exit_code(handle) == 2
    assert not detached.is_running(handle)
    assert "bad input" in detached.tail(handle["log_path"])


# -- the launch as the expansion record keeps it: decided on any host ---------------------------


JOB, EXPANSION = "orders-counter", "orders-counter~orders.2-4"


@pytest.fixture
def store(tmp_path):
    """The store both "hosts" share (nothing else): job model v2 written, the record there."""
    made = FileCoordinatorStore(str(tmp_path / "shared"), JOB)
    v1 = made.write_job_model(JobModel.initial(JOB, {"orders": 2}))
    stamp = now_iso()
    record = ExpansionRecord(
        expansion_id=EXPANSION, job_name=JOB, base_version=1, target_version=2,
        plan={"counts_before": {"orders": 2}, "counts_after": {"orders": 4}},
        status=ExpansionStatus.PLANNED, owner="test", created_at=stamp, updated_at=stamp,
    )  # fmt: skip
    made.put_expansion(record, expected_revision=0)
    made.write_job_model(dataclasses.replace(v1, version=2))
    walk(made, EXPANSION, ExpansionStatus.JOB_MODEL_WRITTEN)
    return made


def _on_host(monkeypatch, tmp_path, name: str) -> str:
    """Act as worker `name`: its own host name and temp dir."""
    home = tmp_path / name
    home.mkdir(exist_ok=True)
    monkeypatch.setenv(detached.HOST_ENV, name)
    monkeypatch.setenv("TMPDIR", str(home))
    return str(home)


def _decide(store, sleep=None):
    waits: list[float] = []
    decision = before_submit(store, EXPANSION, continuous=True, sleep=sleep or waits.append)
    return decision


def _launch_on_a(store, monkeypatch, tmp_path, cmd, **facts) -> dict:
    """Worker A notes a launch in the record, then starts `cmd` detached in its temp dir."""
    home = _on_host(monkeypatch, tmp_path, "worker-a")
    noted = launches.note(
        store, EXPANSION, {**launches.new_facts(store.get_expansion(EXPANSION), application="j.py"),
                           **facts},
    )  # fmt: skip
    handle = detached.launch(cmd, log_path=os.path.join(home, "spark-submit.log"))
    keep = {k: handle[k] for k in ("pid", "log_path", "state_path")}
    launches.note(store, EXPANSION, {**noted, **keep})
    return handle


def _stop_on_a(handle, monkeypatch) -> None:
    monkeypatch.setenv(detached.HOST_ENV, "worker-a")  # its pid is A's to signal
    detached.terminate(handle, timeout_s=10)


SLEEPS = [sys.executable, "-c", "import time; time.sleep(120)"]


def test_a_retry_on_another_host_waits_for_the_launch_and_does_not_launch_it_twice(
    store, monkeypatch, tmp_path
) -> None:
    """Worker A noted its launch and was killed before it recorded the submit; the retry on
    worker B (its own temp dir: A's state file and pids mean nothing there) finds the launch
    in the record, waits while it may still come up, and launches nothing once its processor
    heartbeats. Without the record's launch B launched a second copy at once."""
    handle = _launch_on_a(store, monkeypatch, tmp_path, SLEEPS)
    try:
        facts = launches.facts_of(store.get_expansion(EXPANSION))
        assert facts["host"] == "worker-a" and facts["attempt"] == 1 and facts["pid"]
        _on_host(monkeypatch, tmp_path, "worker-b")
        looks: list[float] = []

        def comes_up(seconds: float) -> None:  # the job's first heartbeat, while B waits
            looks.append(seconds)
            store.heartbeat("worker-a-123", 2, "running", role="active", ttl_s=30)

        decision = _decide(store, sleep=comes_up)
        assert not decision.launch, decision
        assert looks and 0 < looks[0] <= 2.0  # it waited for the launch, then saw it up
        assert "worker-a-123" in decision.message
    finally:
        _stop_on_a(handle, monkeypatch)


def test_a_launch_past_its_window_with_no_live_processor_is_launched_again_from_any_host(
    store, monkeypatch, tmp_path
) -> None:
    """The launch's window passed and no processor of v2 is alive: launch again - even when the
    recorded supervisor pid is alive on B (someone else's process there) and A's state file is
    gone with A's temp dir. Deciding by that pid, B would never launch the job."""
    old = to_iso(utc_now() - timedelta(seconds=120))
    handle = _launch_on_a(store, monkeypatch, tmp_path, SLEEPS, launched_at=old, window_s=60)
    detached.terminate(handle, timeout_s=10)
    os.unlink(handle["state_path"])
    # B's own process under the recorded supervisor pid
    facts = launches.facts_of(store.get_expansion(EXPANSION))
    launches.note(store, EXPANSION, {**facts, "supervisor_pid": os.getpid(), "pid": os.getpid()})
    store.heartbeat("worker-a-123", 2, "failed", role="active", ttl_s=30)  # the try that ended
    _on_host(monkeypatch, tmp_path, "worker-b")
    decision = _decide(store)
    assert decision.launch, decision
    view = launches.judge(launches.facts_of(store.get_expansion(EXPANSION)), {}, 2)
    assert view.state == launches.GONE and "within 60 s" in view.reason, view
    nxt = launches.new_facts(store.get_expansion(EXPANSION), application="j.py")
    assert nxt["attempt"] == 2 and nxt["host"] == "worker-b"


class _Waited(Exception):
    """The submit step chose to wait for the launch (its first sleep)."""


def _waited(seconds: float) -> None:
    raise _Waited(seconds)


def test_its_own_host_judges_a_launch_as_any_other_host_does(store, monkeypatch, tmp_path):
    """No local shortcut: on the launch's own host a supervisor that still runs is not taken
    for the job (the job may hang before its first heartbeat), nor one that exited for gone -
    both hosts judge by the heartbeats and the window alike. Deciding by the local pid, host A
    skipped the launch for as long as the supervisor lived, while host B launched again."""
    handle = _launch_on_a(store, monkeypatch, tmp_path, SLEEPS)

    def views() -> set[str]:
        found = set()
        for host in ("worker-a", "worker-b"):
            _on_host(monkeypatch, tmp_path, host)
            facts = launches.facts_of(store.get_expansion(EXPANSION))
            found.add(launches.judge(facts, store.processors(), 2).state)
        return found

    try:
        assert views() == {launches.STARTING}  # A's supervisor runs: still only "starting"
        _on_host(monkeypatch, tmp_path, "worker-a")
        with pytest.raises(_Waited):  # A waits as B would, no "runs on this host" answer
            _decide(store, sleep=_waited)
    finally:
        _stop_on_a(handle, monkeypatch)
    assert _wait(lambda: detached.exit_code(handle) is not None)
    assert views() == {launches.STARTING}  # exited on A: the record does not say so yet
    store.heartbeat("worker-a-123", 2, "failed", role="active", ttl_s=30)
    assert views() == {launches.GONE}  # its processor ended: gone, on every host
