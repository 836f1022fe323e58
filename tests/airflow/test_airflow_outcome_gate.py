"""Green means done, on the Airflow surface: the report task of a run whose expansion is not on
the cluster (the topic never grown, though every step before the report recorded its end)
fails without retry naming the gap, after completing the record - the outcome gate, not the
record's status machine, refused it. (tests/protocol/test_protocol_outcome_gate.py holds each
gap the gate names.)"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_samza_expand._protocol.ownership import airflow_holder
from airflow_samza_expand._protocol.steps.plan.step import PlanRequest, plan
from airflow_samza_expand.airflow.operators._report import ExpansionReportOperator
from airflow_samza_expand.core._plan import plan_expansion
from airflow_samza_expand.core._record import ExpansionStatus as S

DAG_ID, RUN_ID = "expansion_test", "manual__test"


def test_the_report_of_an_expansion_not_on_the_cluster_fails_at_the_outcome_gate(job, admin):
    j = job(2)
    planned = plan(
        j.store, admin, PlanRequest(job_name=j.name, topics=(j.topic,), check_partitioner=False),
        airflow_holder(DAG_ID, RUN_ID),
    )  # fmt: skip
    eid = planned.expansion_id
    v1 = j.store.latest_job_model()  # v2 written and running, the topic left at 2 partitions
    j.store.write_job_model(plan_expansion(v1, {j.topic: 4}, {j.topic: 4}).new_job_model)
    j.store.heartbeat("p-v2", 2, "running", role="active")
    record = j.store.get_expansion(eid)
    for status in (S.EXPANDED, S.BARRIER_PASSED, S.JOB_STOPPED, S.JOB_MODEL_WRITTEN, S.SUBMITTED):
        record = j.store.put_expansion(record.advance(status), expected_revision=record.revision)
    xcoms = {"plan": {"expansion_id": eid, "plan": dict(record.plan)}, "write": {"version": 2},
             "submit": {"mode": "continuous"}}  # fmt: skip
    ti = SimpleNamespace(dag_id=DAG_ID, task_id="report", run_id=RUN_ID, try_number=1,
                         xcom_pull=lambda task_ids: xcoms.get(task_ids))  # fmt: skip
    task = ExpansionReportOperator(
        task_id="report", job_name=j.name, expansion_id=eid, run_mode="continuous",
        task_ids={k: k for k in xcoms},
    )  # fmt: skip
    gap = f"is not done on the cluster: topic '{j.topic}' has 2 partitions, target 4"
    with pytest.raises(AirflowFailException, match=gap):
        task.execute({"ti": ti})
    assert j.store.get_expansion(eid).status == S.COMPLETED  # refused after complete()
