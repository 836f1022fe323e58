"""Fast checks of the e2e/demo parts: the output verifier's rules and the report's summary
rendering (the detached launcher's checks: tests/protocol/test_protocol_launch.py; the SVG's:
tests/core/test_core_render.py)."""

from __future__ import annotations

from airflow_samza_expand._demo.verify import Verification, check_outputs
from airflow_samza_expand._protocol.steps.report import seconds_per_step


def _passed_verification() -> Verification:
    """A passing verification of one record (for the report's rendering)."""
    return Verification(ok=True, keys=1, records_produced=1, records_counted=1,
                        partitions_consumed=[0], job_model_versions=[1, 2])  # fmt: skip


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
    """One duration per step, named by the DAG's task ids: the record's start to end of each
    step - the same number the job page shows for it."""
    from airflow_samza_expand.airflow._ui.decode import expansion_of
    from airflow_samza_expand.core._record import ExpansionRecord

    times = {  # step: (started, ended) seconds after 01:00:00
        "plan": (0.0, 0.2),
        "expand": (0.3, 1.5),
        "barrier_snapshot": (1.6, 6.5),
        "barrier": (6.6, 8.0),
        "stop": (8.1, 8.15),
        "write": (8.2, 9.0),
        "submit": (9.1, None),
    }

    def at(seconds: float | None) -> str | None:
        return None if seconds is None else f"2026-11-22T01:00:{seconds:06.3f}Z"

    record = ExpansionRecord(
        expansion_id="job~orders.2-4",
        job_name="job",
        base_version=1,
        target_version=2,
        plan={},
        status="job-model-written",
        owner="cli:host/1",
        created_at=at(0.0),
        updated_at=at(9.0),
        steps={s: {"started_at": at(a), "ended_at": at(b)} for s, (a, b) in times.items()},
        results={"stop": {"requested": False}},
    )
    steps = seconds_per_step(record)
    assert steps == {
        "plan": 0.2,
        "expand": 1.2,
        "barrier (grace and snapshot)": 4.9,
        "barrier (drain)": 1.4,
        "stop_job": None,  # nothing was running (available-now)
        "write_job_model": 0.8,
        "submit": None,  # still running
        "ack": None,
    }
    page = {s.name: s.duration_s for s in expansion_of(record.expansion_id, record).steps}
    assert {k: v for k, v in page.items() if k != "stop_job"} == {
        k: v for k, v in steps.items() if k in page and k != "stop_job"
    }


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
    """docs/design.md 'Stale placements': the barrier snapshots at max(grace, last stale
    placement + quiet window). A producer refreshing 1.2 s after the expansion (grace 4 s, quiet
    4 s) moves the snapshot to 5.2 s: a barrier that waited 5.4 s + 0.8 s drain is within the
    bound (the grace-only bound of 4 s + drain + poll called it ABOVE BOUND)."""
    from types import SimpleNamespace

    from airflow_samza_expand._demo.report import build_report, figure_lines
    from airflow_samza_expand.core._record import ExpansionRecord

    def record(last_stale_at: str | None) -> ExpansionRecord:
        return ExpansionRecord(
            expansion_id="job~orders.2-4", job_name="job", base_version=1, target_version=2,
            plan={}, status="completed", owner="cli:host/1", created_at="2026-11-22T01:00:00Z",
            updated_at="2026-11-22T01:00:09Z",
            steps={"expand": {"ended_at": "2026-11-22T01:00:01.000Z"}},
            stale_placements={"last_stale_at": last_stale_at} if last_stale_at else {},
        )  # fmt: skip

    steps = {"barrier (grace and snapshot)": 5.4, "barrier (drain)": 0.8}
    outcome = SimpleNamespace(
        counts=(2, 4), state="success", tasks={}, summary={"seconds_per_step": steps},
        probe={"drain_s": 0.9, "downtime_s": None}, wall_s=30.0,
    )  # fmt: skip
    verification = _passed_verification()
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


def test_in_place_downtime_is_the_longest_gap_around_the_switch_minus_the_cadence() -> None:
    """Batches every 0.5 s; vN+1 written at 10.2, the job switched at 11.0 and its next batch
    came 1.9 s after the last one before the write: downtime 1.9 - 0.5 = 1.4 s. A long gap
    before the write (the steady state's) or after the 3rd batch after the switch is not it."""
    from airflow_samza_expand._demo.latency import switch_downtime_s

    steady = [i * 0.5 for i in range(21)]  # 0.0 .. 10.0
    after = [11.9, 12.4, 12.9, 13.4, 20.0]  # a late gap after the 3rd batch: not the switch's
    assert switch_downtime_s([*steady, *after], 10.2, 11.0) == 1.4
    assert switch_downtime_s([*steady, 11.9, 12.4], 10.2, 11.0) is None  # 3 batches after it
    assert switch_downtime_s([*steady, 10.5, 11.1, 11.6, 12.1], 10.2, 11.0) == 0.1
    assert switch_downtime_s([10.0], 10.2, 11.0) is None  # no steady state before the write


def test_switch_and_commit_lines_of_the_job_log() -> None:
    from datetime import datetime

    from airflow_samza_expand._demo.latency import commit_times, commits, switch_times

    log = (
        "2026-11-26 02:00:00,100 INFO samza: committed group 'j' offsets "
        '{"t": {"0": 5, "1": 7}}\n'
        "2026-11-26 02:00:00,600 INFO source: switch in place: job model v1 -> v2\n"
        "2026-11-26 02:00:01,250 INFO samza: committed group 'j' offsets "
        '{"t": {"0": 9, "1": 7, "3": 2}}\n'
    )
    t0 = datetime(2026, 11, 26, 2, 0, 0, 100000).timestamp()
    assert commit_times(log) == [t0, t0 + 1.15]
    assert commits(log)[1].offsets == {"t": {0: 9, 1: 7, 3: 2}}
    assert switch_times(log) == [t0 + 0.5]


def test_moved_key_latency_runs_from_the_first_record_in_a_new_partition_to_its_output() -> None:
    """Key a's first record in a new partition (seq 7, produced at 100.0) was first counted by an
    output at 102.5 (an earlier output counted only up to seq 6); b at 101.0 -> 101.5; c was
    never counted."""
    from airflow_samza_expand._demo.latency import moved_key_latency

    first = {"a": (7, 100.0), "b": (3, 101.0), "c": (1, 100.0)}
    outputs = [("a", 6, 101.0), ("b", 3, 101.5), ("a", 8, 102.5), ("a", 9, 103.0), ("x", 1, 99.0)]
    got = moved_key_latency(first, outputs)
    assert (got.keys, got.median_s, got.max_s, got.unprocessed) == (3, 1.5, 2.5, 1)
    assert moved_key_latency({}, outputs).median_s is None


def test_demo_reports_the_in_place_switch_against_its_target_with_moved_key_latency() -> None:
    from types import SimpleNamespace

    from airflow_samza_expand._demo.latency import MovedKeyLatency
    from airflow_samza_expand._demo.report import IN_PLACE_TARGET_RATIO, build_report, figure_lines

    outcome = SimpleNamespace(
        factor=2, counts=(2, 4), state="success", summary=None, tasks={}, wall_s=1.0,
        probe={"downtime_s": 0.13, "barrier_reached_at": None}, standby_took_over=False,
        restart="in-place",
    )  # fmt: skip
    scenario = SimpleNamespace(
        cfg=SimpleNamespace(
            run_mode="continuous", naive=False, grace_s=4.0, poll_s=1.0, stale_quiet_s=None
        ),
        outcomes=[outcome], plain_restart_s=36.4, job_name="j", topic="t", models=[],
        latencies=[MovedKeyLatency(keys=20, median_s=0.8, max_s=1.6, unprocessed=0)],
    )  # fmt: skip
    verification = _passed_verification()
    report = build_report(
        scenario=scenario, verification=verification, total_s=1.0, step_seconds={}, records=[None]
    )
    t = report["timings"]
    assert t["restart"] == "in-place" and t["downtime_target_ratio"] == IN_PLACE_TARGET_RATIO
    assert t["moved_key_latency"]["in-place"]["median_s"] == 0.8
    assert report["expansions"][0]["moved_key_latency"]["keys"] == 20
    lines = figure_lines(report)
    assert lines[0] == (
        "Downtime (in-place switch): 0.13s vs plain restart 36.4s = 0.004x (target <= 0.05x: OK)"
    )
    assert lines[1] == (
        "Moved keys 2->4 (in-place): first record in a new partition -> processed: median "
        "0.80s, max 1.60s over 20 keys"
    )


def test_demo_switches_in_place_by_default_in_continuous_mode() -> None:
    from airflow_samza_expand._demo.cli import default_restart

    assert default_restart("continuous", naive=False) == "in-place"
    assert default_restart("available-now", naive=False) == "warm"
    assert default_restart("continuous", naive=True) == "warm"


def test_demo_reads_the_switch_downtime_from_the_job_log_and_skips_a_relaunch(tmp_path) -> None:
    """The job committed every 0.5 s, vN+1 was written at 10.2 s (the expansion record), the job
    logged its switch at 11.0 s and committed at 11.9, 12.4, 12.9: 1.4 s. A launch that started
    after the write (a relaunch on vN+1) switched nothing: None, at once."""
    from datetime import UTC, datetime
    from types import SimpleNamespace

    from airflow_samza_expand._demo.latency import in_place_downtime
    from airflow_samza_expand.core._record import StepTimes

    t0 = 1_800_000_000.0

    def line(at: float, text: str) -> str:
        stamp = datetime.fromtimestamp(t0 + at).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
        return f"{stamp} INFO samza: {text}\n"

    commit = "committed group 'j' offsets {\"t\": {\"0\": 1}}"
    log = tmp_path / "job.log"
    log.write_text(
        "".join(line(i * 0.5, commit) for i in range(21))
        + line(11.0, "switch in place: job model v1 -> v2")
        + "".join(line(at, commit) for at in (11.9, 12.4, 12.9))
    )
    written = datetime.fromtimestamp(t0 + 10.2, UTC).isoformat()
    store = SimpleNamespace(get_expansion=lambda _id: SimpleNamespace(
        steps={"write": StepTimes(started_at=written)}))  # fmt: skip
    scenario = SimpleNamespace(store=store, job=SimpleNamespace(handle={"log_path": str(log)}))
    assert in_place_downtime(scenario, "e", timeout_s=0) == 1.4
    log.write_text("".join(line(at, commit) for at in (11.9, 12.4, 12.9)))
    assert in_place_downtime(scenario, "e", timeout_s=600) is None


def test_an_in_app_or_in_place_restart_is_no_standby_taking_over() -> None:
    """Only a handover's standby takes over. An in-app processor that restarted its query on
    vN+1 before the submit step looked is found running too, and the standby step (which
    launched nothing) succeeded - that is not a standby taking over."""
    from airflow_samza_expand._demo.scenario_dag import standby_took_over

    done = {"submit_standby": "success", "submit": "skipped"}
    running = {"already_running": ["vm-1"], "reason": "in-app restart: launching nothing"}
    assert standby_took_over(done, running, "warm")
    assert not standby_took_over(done, running, "in-app")
    assert not standby_took_over(done, running, "in-place")
    assert not standby_took_over(done, {"already_running": []}, "warm")
    assert not standby_took_over({**done, "submit_standby": "failed"}, running, "warm")
    assert not standby_took_over(done, None, "warm")
