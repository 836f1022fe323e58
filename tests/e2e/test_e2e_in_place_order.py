"""The proof of order after a switch in place: the shipped job, expanded 2 -> 4 by the DAG with
``restart="auto"`` (in place: nothing restarts), counts the stale placements beyond v2's
barrier snapshot in its own micro-batches, exactly like a restarted job given
``--barrier-offsets auto`` would, and publishes them (expansion record, heartbeat).

A second producer refreshes its metadata every ``refresh_ms``: 60 s (far longer than the 3 s
grace; the quiet window is 0, so the barrier snapshots right after the grace while it still
writes moved keys to their old partitions) -> the job counts them after the snapshot and the
report says ``order: at risk``; 1 s (within the grace) -> 0 and ``order: proven``. Both: the
verification passes with no order violation. At risk, the job's micro-batches (not a barrier
scan) counted the placements before the snapshot too (``counted_by``).
"""

from __future__ import annotations

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.spark,
    pytest.mark.kafka,
    pytest.mark.apache_ci,
    pytest.mark.timeout(600),
]


@pytest.mark.parametrize(("refresh_ms", "at_risk"), [(60_000, True), (1_000, False)])
def test_running_job_counts_stale_placements_beyond_vn1_snapshot_in_place(
    scenario, refresh_ms: int, at_risk: bool
) -> None:
    from airflow_samza_expand._demo.jobs import wait_for
    from airflow_samza_expand._demo.stale import add_stale_producer, expansion_records
    from airflow_samza_expand.core._liveness import statuses
    from airflow_samza_expand.core._order import JOB_SOURCE, SCAN_SOURCE

    s = scenario(
        run_mode="continuous", restart="auto", grace_s=3.0, poll_s=0.5, stale_quiet_s=0.0
    )
    s.start_producer()
    s.start_job()
    # started just before the expansion: its first refresh comes refresh_ms after it
    stale = add_stale_producer(s, refresh_ms)
    pid = int(s.job.handle["pid"])
    outcome = s.expand()
    assert outcome.state == "success", outcome.tasks
    assert outcome.summary["restart"]["mode"] == "in-place", outcome.summary["restart"]
    assert int(s.job.handle["pid"]) == pid  # the same job: no restart gave it --barrier-offsets
    (record,) = expansion_records(s)

    def job_counted() -> int:
        current = s.store.get_expansion(record.expansion_id)
        return int((current.stale_placements.get("after_snapshot") or {}).get("records", 0))

    if at_risk:
        wait_for("the running job to count stale placements beyond v2's snapshot",
                 lambda: job_counted() > 0, timeout_s=120, log=s.log)  # fmt: skip
        (processor,) = statuses(s.store.processors()).values()  # the one processor, on v2
        assert processor.job_model_version == 2, processor

        def beat() -> dict:  # the heartbeat after the count carries it
            (doc,) = s.store.processors().values()
            return doc.get("stale_placements") or {}

        wait_for("the job's heartbeat to carry its stale placement counts",
                 lambda: beat().get("records", 0) > 0, timeout_s=60, log=s.log)  # fmt: skip
        assert {k for k, _ in beat()["keys"]} <= set(stale.keys), beat()  # the slow producer's
        assert outcome.summary["order"]["order"] == "at risk", outcome.summary["order"]
        # before the snapshot too the running job's micro-batches counted the slow producer's
        # placements, and the barrier read no records itself (no scan of its own)
        evidence = s.store.get_expansion(record.expansion_id).stale_placements
        counted_by = str(evidence.get("counted_by"))
        assert counted_by.startswith(
            f"{JOB_SOURCE} (processor {processor.processor_id},"
        ), counted_by  # fmt: skip
        assert SCAN_SOURCE not in counted_by, counted_by
        assert int((evidence.get("before_snapshot") or {}).get("records", 0)) > 0, evidence
    result = s.finish(expected_versions=[1, 2])
    print(f"[e2e] in place, stale producer refresh {refresh_ms} ms: {result.describe()}")
    # both branches: the verification passes and no key saw a sequence violation - stale
    # placements beyond the snapshot are counted (at risk), never read out of order
    assert result.ok, result.describe()
    assert not result.order_violations, result.order_violations
    assert result.records_produced > 0 and result.records_counted == result.records_produced
    if not at_risk:
        assert job_counted() == 0
        assert outcome.summary["order"]["order"] == "proven", outcome.summary["order"]
