"""The job page at size, from records in a file store (no Kafka, no server): it grows with the
tasks, not the SSPs - a row per task with partition ranges, the diagram and every SSP on demand,
a barrier table of the most lagging partitions - and a small job model keeps its details inline."""

from __future__ import annotations

from pathlib import Path

from ui_helpers import planned_record

from airflow_samza_expand.airflow._ui.data import read_job
from airflow_samza_expand.airflow._ui.html import job_page
from airflow_samza_expand.airflow._ui.records import BarrierRow
from airflow_samza_expand.airflow._ui.settings import UiSettings
from airflow_samza_expand.core._clock import now_iso
from airflow_samza_expand.core._plan import plan_expansion
from airflow_samza_expand.core._record import ExpansionStatus
from airflow_samza_expand.core._render import render_svg
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._files import FileCoordinatorStore

JOB = "orders-job"


def _page(root: Path, before: int) -> str:
    """The page of a job grown ``before -> 2 * before``, its barrier waiting on every old
    partition (lag p % 5: a fifth of them committed up to it)."""
    store = FileCoordinatorStore(str(root), JOB)
    v1 = store.write_job_model(JobModel.initial(JOB, {"orders": before}))
    record = planned_record(v1, {"orders": 2 * before})
    store.write_job_model(
        plan_expansion(v1, {"orders": before}, {"orders": 2 * before}).new_job_model
    )
    barrier = {p: 100 + p for p in range(before)}
    stamp = now_iso()
    record = (
        record.advance(ExpansionStatus.EXPANDED)
        .advance(ExpansionStatus.BARRIER_SNAPSHOT, barrier={"orders": barrier})
        .with_step("barrier", started_at=stamp)
    )
    store.put_expansion(record, expected_revision=0)
    snap = read_job(UiSettings(coordinator=str(root), discover=False), JOB)
    snap.barrier_of = record.expansion_id
    snap.barrier_rows = [BarrierRow("orders", p, o, o - p % 5, p % 5) for p, o in barrier.items()]
    return job_page(snap, "/se", render_svg(snap.latest))


def test_the_page_grows_with_the_tasks_and_lists_the_most_lagging_partitions(tmp_path):
    small = _page(tmp_path / "small", 2)  # every SSP inline, as before
    assert "<svg" in small and "[kafka, orders, 3]</td><td>Partition 1</td><td>1</td>" in small
    assert "more partitions not listed" not in small

    pages = {n: _page(tmp_path / str(n), n) for n in (128, 256, 512)}
    big = pages[512]
    assert "buckets -&gt; tasks" not in big and "[kafka, orders," not in big  # on demand:
    assert "href='/se/jobs/orders-job/buckets.svg'" in big
    assert "href='/se/api/jobs/orders-job/models/2'" in big
    # a row per task: the partitions it reads and those an expansion added, as ranges
    assert "<td>Partition 7</td><td>orders 7, 519</td><td>orders 519</td>" in big
    # the barrier: the 16 most lagging of 512 old partitions (lag 4: p % 5 == 4), the rest counted
    for table in ("<th>lag</th>", "<th>old partition</th>"):
        rows = big.split(table, 1)[1].split("</table>", 1)[0]
        assert rows.count("<tr>") == 16 and rows.count("<td>4</td>") == 16, table
    assert "496 more partitions not listed: 103 committed up to their barrier offset" in big
    # linear: twice the partitions, at most twice the bytes (618 kB at 1,024 before)
    sizes = [len(pages[n].encode()) for n in (128, 256, 512)]
    assert sizes[2] <= 2.1 * sizes[1] and sizes[1] <= 2.1 * sizes[0], sizes
    assert sizes[2] < 100_000, sizes
