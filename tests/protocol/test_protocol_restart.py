"""The restart home (`_protocol.restart`): one object per strategy, chosen
in the registry's order from the running processors' capabilities - in place, in-app, the
user's restart task (when one is supplied), warm, cold - and asked by the steps."""

from __future__ import annotations

import dataclasses

import pytest
from record_states import EXPANSION, walk

from airflow_samza_expand._protocol import restart
from airflow_samza_expand._protocol.steps import standby
from airflow_samza_expand._protocol.steps.ack import ack_poll
from airflow_samza_expand._protocol.steps.stop import request_stop
from airflow_samza_expand._protocol.steps.submit import before_submit
from airflow_samza_expand.core._record import ExpansionStatus
from airflow_samza_expand.core.errors import ExpansionError


def _beat(store, pid: str, capabilities: list[str], version: int = 1) -> None:
    store.heartbeat(pid, version, "running", role="active", ttl_s=30, capabilities=capabilities)


def _choose(store, requested: str = "auto", **kwargs) -> restart.RestartChoice:
    return restart.choose_restart(store.processors(), 1, requested, **kwargs)


def test_the_registry_tries_in_place_in_app_task_warm_cold_in_that_order() -> None:
    assert list(restart.STRATEGIES) == ["in-place", "in-app", "task", "warm", "cold"]
    assert restart.modes()[0] == "auto"


def test_a_requested_restart_is_one_of_the_modes_by_name() -> None:
    assert restart.normalise_restart(" Warm ") == "warm"
    assert restart.normalise_restart("in-app") == "in-app"
    with pytest.raises(ExpansionError, match=r"restart='hot' is not known - use 'in-place'"):
        restart.normalise_restart("hot")


@pytest.mark.parametrize(
    ("capabilities", "mode"),
    [
        (["in-place", "standby"], "in-place"),  # the provider's reader
        (["in-app", "standby"], "in-app"),  # Spark's own source, job.run(start)
        (["standby"], "warm"),  # job.run(query): can only be restarted
        ([], "cold"),  # not on the runtime's lease
    ],
)
def test_auto_takes_the_first_strategy_every_live_processor_can_do(store, capabilities, mode):
    _beat(store, "a", capabilities)
    choice = _choose(store)
    assert (choice.restart, choice.requested) == (mode, "auto"), choice
    assert choice.strategy is restart.STRATEGIES[mode]


def test_in_app_needs_every_live_processor_to_advertise_it(store):
    _beat(store, "a", ["in-app", "standby"])
    _beat(store, "b", ["standby"])
    assert _choose(store).restart == "warm"
    with pytest.raises(ExpansionError, match=r"'in-app'.*processor\(s\) b of v1.*job.run\(start\)"):
        _choose(store, "in-app")
    store.remove_processor("b")
    assert _choose(store, "in-app").restart == "in-app"


def test_a_restart_task_replaces_warm_and_cold_but_never_a_switch_inside_the_app(store):
    _beat(store, "a", ["standby"])
    choice = _choose(store, restart_task=True)
    assert choice.restart == "task" and choice.strategy.user_task, choice
    assert _choose(store, "task").restart == "task"  # asking for it by name says it is supplied
    _beat(store, "a", ["in-app", "standby"])
    assert _choose(store, "task").restart == "in-app"  # launches nothing: still first
    assert _choose(store, restart_task=True).restart == "in-app"


def test_no_live_processor_is_cold_or_the_users_task(store):
    assert _choose(store).restart == "cold"
    assert _choose(store, restart_task=True).restart == "task"
    assert "no live processor" in _choose(store, "in-app").reason


def _record_choice(store, choice: restart.RestartChoice) -> None:
    record = store.get_expansion(EXPANSION)
    changed = record.with_result("plan", {"restart": choice.to_dict()})
    store.put_expansion(changed, expected_revision=record.revision)


def test_in_app_stops_nothing_launches_nothing_and_the_barrier_waits_for_the_drain(store):
    _beat(store, "a", ["in-app", "standby"])
    choice = _choose(store)
    _record_choice(store, choice)
    record = store.get_expansion(EXPANSION)
    assert restart.RestartChoice.of_record(record) == choice
    assert restart.waits_for_drain(record)  # Spark's source cannot gate a child by its parent
    assert restart.launches_nothing(record) == choice
    assert standby.before_standby(store, EXPANSION).launch == 0
    walk(store, EXPANSION, ExpansionStatus.BARRIER_PASSED)
    decision = request_stop(store, "expansion", expansion_id=EXPANSION)
    assert not decision.requested and store.stop_request() is None
    assert "in-app restart" in decision.message and "nothing to stop" in decision.message
    store.write_job_model(dataclasses.replace(store.latest_job_model(), version=2))
    walk(store, EXPANSION, ExpansionStatus.JOB_MODEL_WRITTEN)
    submit = before_submit(store, EXPANSION, continuous=True)  # v2 has no heartbeat yet
    assert not submit.launch and "launching nothing" in submit.message
    waiting = ack_poll(store, 2, expansion_id=EXPANSION)
    assert not waiting.done and "restarting its query" in waiting.message
    _beat(store, "a", ["in-app", "standby"], version=2)  # the same processor, on v2
    assert ack_poll(store, 2, expansion_id=EXPANSION).done


def test_the_users_task_strategy_stops_the_job_and_lets_the_submit_step_go_on(store):
    _record_choice(store, _choose(store, restart_task=True))
    _beat(store, "a", [])
    walk(store, EXPANSION, ExpansionStatus.BARRIER_PASSED)
    assert request_stop(store, "expansion", expansion_id=EXPANSION).requested
    store.remove_processor("a")
    store.write_job_model(dataclasses.replace(store.latest_job_model(), version=2))
    walk(store, EXPANSION, ExpansionStatus.JOB_MODEL_WRITTEN)
    assert before_submit(store, EXPANSION, continuous=True).launch


def test_a_processor_without_in_app_gets_the_warm_handover_not_a_query_restart(store):
    """What the in-app e2e test's job gets when its processor does not advertise ``in-app``
    (Spark's own source on a runtime that says only ``standby``): the plan chooses warm, the
    standby step launches vN+1, the stop step stops vN, the submit step launches vN+1 unless
    the standby runs it, the ack names the standby; a DAG that launches nothing refuses at
    the plan, naming the processor and what it advertises."""
    _beat(store, "a", ["standby"])
    with pytest.raises(ExpansionError, match=r"'in-app'.*processor\(s\) a of v1"):
        _choose(store, "in-app")
    with pytest.raises(ExpansionError, match=r"a advertises standby\).*names no application"):
        _choose(store, launches=False)
    choice = _choose(store)
    assert choice.restart == "warm" and not choice.strategy.launches_nothing, choice
    _record_choice(store, choice)
    assert restart.launches_nothing(store.get_expansion(EXPANSION)) is None
    assert standby.before_standby(store, EXPANSION).launch == 1
    walk(store, EXPANSION, ExpansionStatus.BARRIER_PASSED)
    decision = request_stop(store, "expansion", expansion_id=EXPANSION)
    assert decision.requested and store.stop_request()["version"] == 1, decision
    store.write_job_model(dataclasses.replace(store.latest_job_model(), version=2))
    walk(store, EXPANSION, ExpansionStatus.JOB_MODEL_WRITTEN)
    assert before_submit(store, EXPANSION, continuous=True).launch  # no standby heartbeat yet
    store.heartbeat("b", 2, "standby", role="standby", ttl_s=30, capabilities=["standby"])
    assert not before_submit(store, EXPANSION, continuous=True).launch  # it takes over
    waiting = ack_poll(store, 2, expansion_id=EXPANSION)
    assert not waiting.done and "the standby launched during the grace" in waiting.message
