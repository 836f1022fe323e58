"""The demo's downtime line under the handover restart: it names the restart and
judges it against ratio <= 0.3 (a cold restart keeps the 1.5x target)."""

from __future__ import annotations


def test_demo_downtime_line_names_the_handover_and_its_target() -> None:
    from types import SimpleNamespace

    from airflow_samza_expand._demo.report import HANDOVER_TARGET_RATIO, build_report, figure_lines

    outcome = SimpleNamespace(
        factor=2, counts=(2, 4), state="success", summary=None, tasks={}, wall_s=1.0,
        probe={"downtime_s": 2.0, "barrier_reached_at": None}, handover=True,
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
    report = build_report(  # records: no expansion record, so no stale placement
        scenario=scenario, verification=verification, total_s=1.0, step_seconds={}, records=[None]
    )
    assert report["timings"]["restart"] == "handover"
    assert report["timings"]["downtime_target_ratio"] == HANDOVER_TARGET_RATIO
    line = figure_lines(report)[0]
    assert line.startswith("Downtime (handover restart): expansion 2.00s vs plain restart 20.00s")
    assert "0.10x (target <= 0.3x: OK)" in line
