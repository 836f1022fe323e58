"""The job page shows a completed expansion of one of two streams as ``completed``, with both
streams: the grown one as ``before -> after`` and the one that stays as staying."""

from __future__ import annotations

from airflow_samza_expand._protocol.records import expansion_id_for
from airflow_samza_expand.airflow._ui.data import read_job
from airflow_samza_expand.airflow._ui.html import job_page
from airflow_samza_expand.airflow._ui.settings import UiSettings
from airflow_samza_expand.core._clock import now_iso
from airflow_samza_expand.core._plan import plan_expansion
from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._files import FileCoordinatorStore

JOB = "join-job"


def test_a_completed_two_stream_expansion_shows_both_streams(tmp_path):
    store = FileCoordinatorStore(str(tmp_path), JOB)
    v1 = store.write_job_model(JobModel.initial(JOB, {"orders": 2, "payments": 2}))
    the_plan = plan_expansion(v1, {"orders": 2, "payments": 2}, {"orders": 4})
    store.write_job_model(the_plan.new_job_model)
    at = now_iso()
    store.put_expansion(
        ExpansionRecord(
            expansion_id=expansion_id_for(JOB, {"orders": 2}, {"orders": 4}), job_name=JOB,
            base_version=1, target_version=2, plan=the_plan.to_dict(),
            status=ExpansionStatus.COMPLETED, owner="airflow:dag/run", created_at=at,
            updated_at=at,
        ),
        expected_revision=0,
    )  # fmt: skip

    snap = read_job(UiSettings(coordinator=str(tmp_path), discover=False, log_dirs=()), JOB)

    (expansion,) = snap.expansions
    assert expansion.status == "completed"
    assert expansion.counts_before == {"orders": 2, "payments": 2}
    assert expansion.counts_after == {"orders": 4, "payments": 2}
    html = job_page(snap, "/samza-expand", "")
    assert "orders 2 &rarr; 4" in html and "payments 2 (stays)" in html
