"""Fast checks of the e2e/demo parts: the output verifier's rules and the report's summary
rendering (the detached launcher's checks: tests/protocol/test_protocol_launch.py; the SVG's:
tests/core/test_core_render.py)."""

from __future__ import annotations

from airflow_samza_expand.demo.verify import check_outputs
from airflow_samza_expand.protocol.steps.report import seconds_per_step


def test_verifier_flags_mismatch_violation_and_count_going_back() -> None:
    produced = {"a": 3, "b": 2, "c": 2}
    history = {
        "a": [{"count": 1, "violations": 0}, {"count": 3, "violations": 0}],
        "b": [{"count": 2, "violations": 0}, {"count": 1, "violations": 1}],  # state lost
        "c": [{"count": 2, "violations": 1}],
    }
    mismatches, violations, resets, problems = check_outputs(history, produced)
    assert mismatches == {"b": {"produced": 2, "counted": 1}}
    assert violations == {"b": 1, "c": 1}
    assert resets == {"b": 1}
    assert problems
    ok = check_outputs({"a": [{"count": 3, "violations": 0}]}, {"a": 3})
    assert ok == ({}, {}, {}, [])


def test_seconds_per_step_from_expansion_record() -> None:
    from airflow_samza_expand.core.record import ExpansionRecord

    ended = {
        "plan": "2026-11-22T01:00:00.000Z",
        "expand": "2026-11-22T01:00:01.500Z",
        "barrier_snapshot": "2026-11-22T01:00:06.500Z",
        "barrier": "2026-11-22T01:00:08.000Z",
        "stop": "2026-11-22T01:00:08.100Z",
        "write": "2026-11-22T01:00:09.000Z",
    }
    record = ExpansionRecord(
        expansion_id="job~orders.2-4",
        job_name="job",
        base_version=1,
        target_version=2,
        plan={},
        status="job-model-written",
        owner="cli:host/1",
        created_at=ended["plan"],
        updated_at=ended["write"],
        steps={step: {"ended_at": at} for step, at in ended.items()},
        results={"stop": {"requested": False}},
    )
    steps = seconds_per_step(record)
    assert steps["expand"] == 1.5
    assert steps["producer_refresh_grace"] == 5.0
    assert steps["barrier_drain"] == 1.5
    assert steps["stop_job"] is None  # nothing was running (available-now)
    assert steps["write_job_model"] == 0.9  # from the stop step's end
    assert steps["acknowledge"] is None


def test_demo_refuses_a_port_in_use_and_changes_nothing(tmp_path, capsys) -> None:
    import socket

    from airflow_samza_expand.cli import main

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        out = tmp_path / "out"
        code = main(["demo", "--port", str(port), "--output-dir", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"error: port {port} is in use - pick another --port" in err
    assert not out.exists()


def test_demo_without_java_says_how_to_install_it(tmp_path, capsys, monkeypatch) -> None:
    from airflow_samza_expand.cli import main

    monkeypatch.setenv("PATH", str(tmp_path))  # no java here
    monkeypatch.delenv("JAVA_HOME", raising=False)
    code = main(["demo", "--output-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert "error: no Java found" in err and "openjdk-17" in err
    assert not (tmp_path / "out").exists()


def test_demo_barrier_bound_includes_the_quiet_window_after_the_last_stale_placement() -> None:
    """Rule 1.5: the barrier snapshots at max(grace, last stale placement + quiet window). A
    producer refreshing 1.2 s after the expansion (grace 4 s, quiet 4 s) moves the snapshot to
    5.2 s: a barrier that waited 5.4 s + 0.8 s drain is within the bound (the grace-only bound of
    4 s + drain + poll called it ABOVE BOUND)."""
    from types import SimpleNamespace

    from airflow_samza_expand.core.record import ExpansionRecord
    from airflow_samza_expand.demo.report import build_report, figure_lines

    def record(last_stale_at: str | None) -> ExpansionRecord:
        return ExpansionRecord(
            expansion_id="job~orders.2-4", job_name="job", base_version=1, target_version=2,
            plan={}, status="completed", owner="cli:host/1", created_at="2026-11-22T01:00:00Z",
            updated_at="2026-11-22T01:00:09Z",
            steps={"expand": {"ended_at": "2026-11-22T01:00:01.000Z"}},
            stale_placements={"last_stale_at": last_stale_at} if last_stale_at else {},
        )  # fmt: skip

    steps = {"producer_refresh_grace": 5.4, "barrier_drain": 0.8}
    outcome = SimpleNamespace(
        counts=(2, 4), state="success", tasks={}, summary={"seconds_per_step": steps},
        probe={"drain_s": 0.9, "downtime_s": None}, wall_s=30.0,
    )  # fmt: skip
    verification = SimpleNamespace(
        ok=True, keys=1, records_produced=1, records_counted=1, count_mismatches={},
        order_violations={}, count_resets={}, partitions_consumed=[0], problems=[],
        job_model_versions=[1, 2],
    )  # fmt: skip
    cfg = SimpleNamespace(grace_s=4.0, poll_s=0.2, stale_quiet_s=None, run_mode="continuous",
                          naive=False)  # fmt: skip
    scenario = SimpleNamespace(cfg=cfg, outcomes=[outcome], plain_restart_s=None, job_name="job",
                               topic="orders", models=[])  # fmt: skip

    def report(last_stale_at: str | None) -> dict:
        return build_report(scenario=scenario, verification=verification, total_s=60.0,
                            step_seconds={}, records=[record(last_stale_at)])  # fmt: skip

    held = report("2026-11-22T01:00:02.200Z")["expansions"][0]
    assert held["last_stale_s"] == 1.2 and held["snapshot_bound_s"] == 5.2
    assert held["barrier_bound_s"] == round(5.2 + 0.9 + 0.2, 3)
    assert held["barrier_within_bound"] is True
    line = figure_lines({"timings": {"downtime_s": None, "plain_restart_s": None, "total_s": 1},
                         "expansions": [held], "verification": {"ok": True}})[0]  # fmt: skip
    assert "max(grace 4.00s, last stale placement 1.20s + quiet 4.00s)" in line
    assert line.endswith("(OK)")
    none_stale = report(None)["expansions"][0]
    assert none_stale["snapshot_bound_s"] == 4.0 and none_stale["barrier_within_bound"] is False
