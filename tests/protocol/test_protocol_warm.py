"""The warm restart's steps in the protocol: the vN+1 standby is launched once, and the submit
step launches nothing while a live standby of vN+1 exists (it takes over itself); in place
launches, stops and submits nothing; what each strategy has each step do. How the restart is
chosen: test_protocol_restart.py."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from record_states import EXPANSION, JOB, walk

from airflow_samza_expand._protocol import restart
from airflow_samza_expand._protocol.job import launches
from airflow_samza_expand._protocol.steps import standby
from airflow_samza_expand._protocol.steps.submit import before_submit
from airflow_samza_expand._testing.liveness import heartbeat_dead
from airflow_samza_expand.core._clock import to_iso, utc_now
from airflow_samza_expand.core._record import ExpansionStatus


def test_standby_args_name_the_new_version_once():
    args = ["--job-name", JOB, "--standby", "--job-model-version", "1", "--trigger", "x"]
    assert standby.standby_args(args, 2) == [
        "--job-name", JOB, "--trigger", "x", "--standby", "--job-model-version", "2",
    ]  # fmt: skip


def test_standby_is_launched_once_for_the_new_version(store):
    first = standby.before_standby(store, EXPANSION)
    assert first.launch == 1 and first.version == 2
    # a standby of the OLD model (a hot standby of v1) does not count for v2
    store.heartbeat("v1-standby", 1, "standby", role="standby", ttl_s=30)
    assert standby.before_standby(store, EXPANSION).launch == 1
    # a launch an earlier try noted (on any worker) that does not heartbeat yet (JVM start):
    # the step waits for it, and launches nothing once it heartbeats
    _note_standby_launch(store)
    looks: list[float] = []

    def comes_up(seconds: float) -> None:
        looks.append(seconds)
        store.heartbeat("v2-standby", 2, "starting", role="standby", ttl_s=30)

    decision = standby.before_standby(store, EXPANSION, sleep=comes_up)
    assert decision.launch == 0 and looks and decision.live == ["v2-standby"], decision
    # a hot standby wants a second processor of v2
    hot = standby.before_standby(store, EXPANSION, processors=2, step="hot_standby")
    assert hot.launch == 1 and hot.live == ["v2-standby"]


def test_a_noted_standby_launch_gone_past_its_window_is_launched_again(store):
    _note_standby_launch(store, launched_at=to_iso(utc_now() - timedelta(seconds=120)))
    decision = standby.before_standby(store, EXPANSION, sleep=_no_wait)
    assert decision.launch == 1 and "came up within 60 s" in decision.message, decision


def test_a_hot_standby_waits_for_its_own_launch_not_for_the_running_processor(store):
    """The hot standby's launch is up only once a processor beyond those alive at its launch
    heartbeats: the running one does not stand for it."""
    store.heartbeat("v2-active", 2, "running", role="active", ttl_s=30)
    _note_standby_launch(store, step="hot_standby", live=["v2-active"])
    looks: list[float] = []

    def comes_up(seconds: float) -> None:
        looks.append(seconds)
        store.heartbeat("v2-hot", 2, "standby", role="standby", ttl_s=30)

    hot = standby.before_standby(store, EXPANSION, processors=2, step="hot_standby", sleep=comes_up)
    assert hot.launch == 0 and looks and hot.live == ["v2-active", "v2-hot"], hot


def _note_standby_launch(store, step: str = "standby", live=(), **facts) -> None:
    noted = launches.new_facts(store.get_expansion(EXPANSION), application="j.py", step=step,
                               live=live, window_s=60)  # fmt: skip
    launches.note(store, EXPANSION, {**noted, **facts})


def _no_wait(seconds: float) -> None:
    raise AssertionError(f"waited {seconds} s for a launch that is gone")


def test_a_dead_standby_is_replaced(store):
    heartbeat_dead(store, "v2-standby", 2, "standby", role="standby")
    assert standby.before_standby(store, EXPANSION).launch == 1


def _model_written(store) -> None:
    """v2 written and the record at ``job-model-written``: where the submit step starts."""
    store.write_job_model(dataclasses.replace(store.latest_job_model(), version=2))
    walk(store, EXPANSION, ExpansionStatus.JOB_MODEL_WRITTEN)


def test_submit_launches_nothing_while_a_live_standby_of_the_new_model_exists(store):
    _model_written(store)
    assert store.latest_job_model().version == 2
    assert before_submit(store, EXPANSION, continuous=True).launch  # nobody for v2 yet
    store.heartbeat("v2-standby", 2, "standby", role="standby", ttl_s=30)
    decision = before_submit(store, EXPANSION, continuous=True)
    assert not decision.launch and decision.running == ["v2-standby (standby)"]


def test_submit_waits_for_the_warm_standby_launch_still_starting(store):
    _model_written(store)
    _note_standby_launch(store)  # noted by the standby step on some worker, no heartbeat yet
    looks: list[float] = []

    def comes_up(seconds: float) -> None:
        looks.append(seconds)
        store.heartbeat("v2-standby", 2, "standby", role="standby", ttl_s=30)

    decision = before_submit(store, EXPANSION, continuous=True, sleep=comes_up)
    assert not decision.launch and looks and decision.running == ["v2-standby (standby)"]


def _beat(store, pid: str, capabilities: list[str], version: int = 1) -> None:
    store.heartbeat(pid, version, "running", role="active", ttl_s=30, capabilities=capabilities)


def _choose_in_place(store) -> None:
    _beat(store, "a", ["in-place", "standby"])
    choice = restart.choose_restart(store.processors(), 1, "auto")
    record = store.get_expansion(EXPANSION)
    changed = record.with_result("plan", {"restart": choice.to_dict()})
    store.put_expansion(changed, expected_revision=record.revision)
    assert restart.RestartChoice.of_record(store.get_expansion(EXPANSION)) == choice


def test_in_place_launches_no_standby_stops_nothing_and_submits_nothing(store):
    from airflow_samza_expand._protocol.steps.stop import request_stop

    _choose_in_place(store)
    assert "in-place" in standby.before_standby(store, EXPANSION).message
    assert standby.before_standby(store, EXPANSION).launch == 0
    walk(store, EXPANSION, ExpansionStatus.BARRIER_PASSED)
    decision = request_stop(store, "expansion", expansion_id=EXPANSION)
    assert decision.version is None and not decision.requested
    assert "nothing to stop" in decision.message and store.stop_request() is None
    _model_written(store)
    submit = before_submit(store, EXPANSION, continuous=True)  # v2 has no heartbeat yet
    assert not submit.launch and "launching nothing" in submit.message


def test_each_restart_strategy_says_what_each_step_does() -> None:
    """The steps ask the chosen strategy (no mode strings in the steps): in place nothing stops,
    nothing is launched and the barrier holds at its snapshot (the job gates the children);
    warm launches a standby and stops vN; cold stops vN and launches vN+1 after the write."""
    table = {
        mode: (s.launches_standby, s.stops_job, s.submits_job, s.waits_for_drain)
        for mode, s in restart.STRATEGIES.items()
    }
    assert table == {
        "in-place": (False, False, False, False),
        "in-app": (False, False, False, True),  # the app restarts its query
        "task": (False, True, True, True),  # the user's restart task starts vN+1
        "warm": (True, True, True, True),
        "cold": (False, True, True, True),
    }
    choice = restart.RestartChoice("in-place", "auto", "test")
    assert choice.strategy is restart.STRATEGIES["in-place"]
    assert restart.waits_for_drain(None)  # no choice recorded: the barrier waits for the drain
