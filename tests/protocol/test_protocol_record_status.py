"""The expansion record's status cannot be ignored: a step that asks for a status the record
cannot reach raises naming both; an expansion of one of two streams completes its record (the
stream that stays is not waited for); the outcome check names what the cluster does not show;
and a record an earlier version left at ``planned`` after a finished expansion is completed by
the next plan, which then plans the new intent instead of "resuming" a finished one."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand._protocol import outcome, records
from airflow_samza_expand._protocol.ownership import cli_holder
from airflow_samza_expand._protocol.steps.expand import ExpandRequest, expand
from airflow_samza_expand._protocol.steps.plan.step import PLANNED, PlanRequest, plan
from airflow_samza_expand.core._clock import now_iso
from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus, StepTimes
from airflow_samza_expand.core.errors import InvalidTransitionError
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

S = ExpansionStatus


def _record(status: ExpansionStatus, **plan) -> ExpansionRecord:
    at = now_iso()
    return ExpansionRecord(
        expansion_id="job~orders.2-4", job_name="job", base_version=1, target_version=2,
        plan=plan or {"counts_before": {"orders": 2}, "counts_after": {"orders": 4}},
        status=status, owner="test", created_at=at, updated_at=at,
    )  # fmt: skip


def test_a_step_asking_for_a_status_the_record_cannot_reach_raises_naming_both():
    with pytest.raises(InvalidTransitionError) as err:
        records.mark(_record(S.PLANNED), "report", S.COMPLETED)
    assert "'completed'" in str(err.value) and "'planned'" in str(err.value)
    with pytest.raises(InvalidTransitionError):
        records.mark(_record(S.PLANNED), "barrier", S.BARRIER_PASSED)


def test_a_rerun_that_finds_the_record_past_the_status_keeps_it():
    done = records.mark(_record(S.BARRIER_PASSED), "expand", S.EXPANDED)
    assert done.status == S.BARRIER_PASSED and done.steps["expand"].ended_at
    assert records.mark(_record(S.PLANNED), "expand", S.EXPANDED).status == S.EXPANDED


def test_grown_counts_leave_out_a_stream_that_stays():
    record = _record(
        S.PLANNED,
        counts_before={"orders": 2, "payments": 2},
        counts_after={"orders": 4, "payments": 2},
    )
    assert record.grown_counts() == {"orders": (2, 4)}


@pytest.fixture
def two_streams(kafka_bootstrap, unique_topic):
    """A job reading `orders` and `payments` (2 partitions each), job model v1 written."""
    config = client_config(kafka_bootstrap)
    name = f"job-{uuid.uuid4().hex[:10]}"
    orders, payments = unique_topic("orders"), unique_topic("payments")
    with KafkaAdmin(config, timeout_s=15) as admin:
        admin.ensure_topic(orders, 2)
        admin.ensure_topic(payments, 2)
        store = KafkaCoordinatorStore(config, name)
        store.write_job_model(JobModel.initial(name, {orders: 2, payments: 2}))
        yield name, orders, payments, store, admin
        store.close()


def _plan(name, topic, store, admin, holder):
    request = PlanRequest(job_name=name, topics=(topic,), check_partitioner=False)
    return plan(store, admin, request, holder)


@pytest.mark.kafka
def test_expanding_one_of_two_streams_moves_the_record_to_expanded(two_streams):
    name, orders, payments, store, admin = two_streams
    planned = _plan(name, orders, store, admin, cli_holder())
    record = records.require(store, planned.expansion_id)
    assert record.plan["counts_after"] == {orders: 4, payments: 2}  # the join's other side
    expand(admin, store, ExpandRequest(orders, factor=2), expansion_id=planned.expansion_id)
    record = records.require(store, planned.expansion_id)
    assert record.status == S.EXPANDED, record.status
    assert admin.partition_counts([orders, payments]) == {orders: 4, payments: 2}


@pytest.mark.kafka
def test_the_outcome_check_names_what_the_cluster_does_not_show(two_streams):
    name, orders, payments, store, admin = two_streams
    planned = _plan(name, orders, store, admin, cli_holder())
    record = records.require(store, planned.expansion_id)  # left at planned: nothing grown
    gaps = outcome.missing(store, admin, record)
    assert any(f"topic {orders!r} has 2 partitions, target 4" in g for g in gaps), gaps
    assert any("job model v2 is not the newest (newest: v1)" in g for g in gaps), gaps
    assert any("'planned', not 'completed'" in g for g in gaps), gaps
    assert not any(payments in g for g in gaps), gaps  # the stream that stays is not looked at
    with pytest.raises(outcome.OutcomeMissingError, match="not done on the cluster"):
        outcome.require(store, admin, planned.expansion_id)


@pytest.mark.kafka
def test_a_finished_record_left_at_planned_is_completed_and_the_next_intent_planned(two_streams):
    """What an earlier version left after a green two-stream run: the topic grown, v2 written,
    every step ended, the record still ``planned``. The next factor-2 run must grow 4 -> 8."""
    name, orders, payments, store, admin = two_streams
    holder = cli_holder()
    first = _plan(name, orders, store, admin, holder)
    admin.create_partitions(orders, 4)
    old = store.latest_job_model()
    store.write_job_model(_v2(old, orders))
    stuck = records.require(store, first.expansion_id)
    ended = StepTimes(now_iso(), now_iso())
    steps = {s: ended for s in ("plan", "expand", "barrier", "stop", "write", "ack", "report")}
    store.put_expansion(
        dataclasses.replace(stuck, steps=steps), expected_revision=stuck.revision
    )
    from airflow_samza_expand._protocol.ownership import give_up

    give_up(store, holder)
    second = _plan(name, orders, store, admin, f"{holder}-next")
    assert second.kind == PLANNED, second.message
    assert records.require(store, second.expansion_id).plan["counts_after"][orders] == 8
    assert records.require(store, first.expansion_id).status == S.COMPLETED


def _v2(model: JobModel, topic: str) -> JobModel:
    from airflow_samza_expand.core._plan import plan_expansion

    counts = model.partition_counts()
    return plan_expansion(model, {**counts, topic: 4}, {topic: 4}).new_job_model
