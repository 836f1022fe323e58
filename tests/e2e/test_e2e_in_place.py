"""End to end, the switch in place: the shipped job (the provider's reader, so it advertises
``in-place``) killed during a switch and launched again on its checkpoint. The shipped job
expanded 2 -> 4 -> 8 in place with the default restart under live keyed traffic (nothing stops,
nothing restarts: the same job process runs before, between and after; the reader's read tasks
per batch) is held by test_e2e_two_streams.py's ``shipped-in-place`` case, with a join of two
streams sharing their keys: one run of that slow scenario checks both."""

from __future__ import annotations

import os

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.timeout(900)]


def read_tasks_by_version(log_path: str) -> dict[int, int]:
    """The most read tasks of a batch per job model version, from the job's batch lines."""
    import re

    most: dict[int, int] = {}
    with open(log_path, encoding="utf-8", errors="replace") as handle:
        for match in re.finditer(r"read by (\d+) tasks on job model v(\d+)", handle.read()):
            tasks, version = int(match[1]), int(match[2])
            most[version] = max(most.get(version, 0), tasks)
    return most


def test_job_killed_before_its_first_batch_on_vn1_restarts_from_its_checkpoint(scenario) -> None:
    """Killed during a switch (vN+1 written, no batch planned on it: the job is frozen from the
    write's start) and launched again on the same checkpoint: it starts on vN+1, still reads a
    child only once it passed its parent's snapshot, and counts every record once, in order."""
    import signal
    import time

    from airflow_samza_expand._protocol.job import launch as detached

    # an 8 s liveness TTL (the job's --ttl): the killed processor's active lease and heartbeat
    # expire sooner, so the relaunch takes over without the default 30 s wait
    s = scenario(
        run_mode="continuous", restart="auto", grace_s=3.0, poll_s=0.5,
        application_args=("--ttl", "8"),
    )  # fmt: skip
    s.start_producer()
    s.start_job()
    first = dict(s.job.handle)
    events: list[str] = []

    def on_task(task: str, event: str) -> None:
        if task != "write_job_model":
            return
        if event == "start":  # frozen: it cannot plan a batch on v2
            os.killpg(int(first["pgid"]), signal.SIGSTOP)
        elif event == "success":
            os.killpg(int(first["pgid"]), signal.SIGKILL)
            while detached.is_running(first):
                time.sleep(0.1)
            events.append(f"killed pid {first['pid']} after v2 was written")
            s.job.launch()  # the same arguments and checkpoint
            events.append(f"relaunched as pid {s.job.handle['pid']}")

    outcome = s.expand(on_task=on_task)
    print(f"[e2e] killed during the switch: {events}; {outcome.state} {outcome.tasks}")
    assert len(events) == 2 and outcome.state == "success", outcome.tasks
    assert outcome.summary["restart"]["mode"] == "in-place"
    result = s.finish(expected_versions=[1, 2])
    print(f"[e2e] killed during the switch: {result.describe()}")
    assert result.ok, result.describe()
    assert result.records_produced > 0 and result.records_counted == result.records_produced
    assert not result.count_resets and not result.order_violations
    assert {2, 3} <= set(result.partitions_consumed)
