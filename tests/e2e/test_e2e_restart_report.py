"""The demo's downtime line names the restart by its strategy: a warm restart is judged against
ratio <= 0.3, an in-app or task restart is called by its own name (a cold restart keeps the
1.5x target)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest


def _report(**outcome_fields):
    from airflow_samza_expand._demo.report import build_report

    outcome = SimpleNamespace(
        factor=2, counts=(2, 4), state="success", summary=None, tasks={}, wall_s=1.0,
        probe={"downtime_s": 2.0, "barrier_reached_at": None}, **outcome_fields,
    )  # fmt: skip
    scenario = SimpleNamespace(
        cfg=SimpleNamespace(
            run_mode="continuous", naive=False, grace_s=4.0, poll_s=1.0, stale_quiet_s=None
        ),
        outcomes=[outcome], plain_restart_s=20.0, job_name="j", topic="t", models=[],
    )  # fmt: skip
    verification = SimpleNamespace(
        ok=True, keys=1, records_produced=1, records_counted=1, count_mismatches=[],
        order_violations=[], count_resets=[], partitions_consumed=[0], problems=[],
        job_model_versions=[1, 2],
    )  # fmt: skip
    return build_report(  # records: no expansion record, so no stale placement
        scenario=scenario, verification=verification, total_s=1.0, step_seconds={}, records=[None]
    )


def test_demo_downtime_line_names_the_warm_restart_and_its_target() -> None:
    from airflow_samza_expand._demo.report import WARM_TARGET_RATIO, figure_lines

    report = _report(standby_took_over=True, restart=None)
    assert report["timings"]["restart"] == "warm"
    assert report["timings"]["downtime_target_ratio"] == WARM_TARGET_RATIO
    line = figure_lines(report)[0]
    assert line.startswith("Downtime (warm restart): expansion 2.00s vs plain restart 20.00s")
    assert "0.10x (target <= 0.3x: OK)" in line


@pytest.mark.parametrize("mode", ["in-app", "task", "cold"])
def test_an_in_app_or_task_restart_is_named_as_itself(mode: str) -> None:
    from airflow_samza_expand._demo.report import DOWNTIME_TARGET_RATIO, figure_lines

    report = _report(standby_took_over=False, restart=mode)
    assert report["timings"]["restart"] == mode
    assert report["timings"]["downtime_target_ratio"] == DOWNTIME_TARGET_RATIO
    assert figure_lines(report)[0].startswith(f"Downtime ({mode} restart): expansion 2.00s")


def test_the_demo_takes_every_restart_by_name_and_its_restart_task_launch(tmp_path) -> None:
    import argparse

    from airflow_samza_expand._demo import cli

    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    for mode in ("auto", "in-place", "in-app", "task", "warm", "cold"):
        assert parser.parse_args(["demo", "--restart", mode]).restart == mode
    with pytest.raises(SystemExit):
        parser.parse_args(["demo", "--handover", "warm"])
    job = SimpleNamespace(handle={"pid": 1}, launch=lambda: {"pid": 2, "log_path": "x.log"})
    scenario = SimpleNamespace(cfg=SimpleNamespace(work_dir=tmp_path), job=job)
    task = cli.restart_task(scenario)
    assert task.task_id == "start_job"
    task.python_callable()  # as the task runs it, maybe in a process of its own
    assert job.handle == {"pid": 1}
    cli.take_restart_task_launch(scenario)
    assert job.handle == {"pid": 2, "log_path": "x.log"}
    cli.take_restart_task_launch(scenario)  # nothing new launched: the handle stays
    assert job.handle == {"pid": 2, "log_path": "x.log"}
