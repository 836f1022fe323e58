"""A server a test tool starts from a background thread outlives that thread (a
rolling restart in a thread restarted every Kafka node with a parent death signal tied to the
thread, and all three nodes stopped together when it returned)."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable

import pytest

from airflow_samza_expand._testing.launch import die_with_parent, exit_with_parent_hook, stop_pid


def _start_in_thread(preexec: Callable[[], Callable[[], None] | None]) -> subprocess.Popen:
    """Start `sleep 60` from a thread that then ends; `preexec()` is asked in that thread, as
    a tool's launch() asks it."""
    started: list[subprocess.Popen] = []
    thread = threading.Thread(
        target=lambda: started.append(
            subprocess.Popen(["sleep", "60"], preexec_fn=preexec())  # noqa: PLW1509
        )
    )
    thread.start()
    thread.join()
    return started[0]


def test_a_server_started_from_a_thread_outlives_the_thread():
    proc = _start_in_thread(lambda: exit_with_parent_hook(True))
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=1.0)  # still running after its thread ended
    finally:
        stop_pid(proc, "sleep")


def test_the_main_thread_keeps_the_parent_death_signal():
    assert exit_with_parent_hook(True) is die_with_parent
    assert exit_with_parent_hook(False) is None


def test_the_hook_chosen_in_a_thread_is_none():
    chosen: list = []
    thread = threading.Thread(target=lambda: chosen.append(exit_with_parent_hook(True)))
    thread.start()
    thread.join()
    assert chosen == [None]


def test_the_parent_death_signal_follows_the_thread():
    """Why: Linux sends the signal when the forking THREAD ends (what stopped the nodes)."""
    proc = _start_in_thread(lambda: die_with_parent)
    try:
        assert proc.wait(timeout=10) != 0
    finally:
        stop_pid(proc, "sleep")
