"""An in-app restart whose last commit finds the lease lost (`spark._in_app.restart_query`),
without Spark: the real broker and lease of `test_driver_outage`'s driven job, its query the
stand-in `OffsetQuery`. The job's membership hangs (the lease's polling paused: the broker
moves the lease on after the TTL and the confirm gets no answer) just as the driver commits
the old query's last batch before restarting it on job model v2 - the fault is real, only its
moment is chosen. The driver fences itself, waits for the lease, takes it again and restarts
its query on v2; it used to die with the `LeaseLostError`."""

from __future__ import annotations

import dataclasses
import threading

import pytest
import test_driver_outage as outage
from test_driver_outage import Driven, OffsetQuery, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(300)]


class FinishingQuery(OffsetQuery):
    """Spark's query as the in-app restart meets it: a batch that finished as the watch stopped
    the query, left to the restart's commit."""

    def stop(self) -> None:
        if self.isActive:
            self.awaitTermination(0)  # one batch more
        super().stop()


def test_an_in_app_restart_fenced_at_its_last_commit_resumes_and_restarts_on_the_new_model(
    restartable_apache_kafka, tmp_path, monkeypatch
):
    monkeypatch.setattr(outage, "TTL_S", 6.0)  # fenced within seconds, not a minute
    driven = Driven(restartable_apache_kafka, tmp_path, monkeypatch)
    job = driven.job
    job.lifecycle.in_app = True  # as read_kafka() on Spark's own source sets it
    lease = job.lifecycle.lease
    hung = threading.Event()
    commit_progress = job.commit_progress

    def hang_at_the_restarts_commit(query):
        # the restart's commit: the old query stopped by the watch, the restart decided
        if job.restart_due is not None and not query.isActive and not hung.is_set():
            hung.set()
            lease.pause_polling()
        return commit_progress(query)

    def start() -> FinishingQuery:
        query = FinishingQuery(driven.topic, driven.checkpoint, lease, driven.batches)
        driven.queries.append(query)
        return query

    monkeypatch.setattr(job, "commit_progress", hang_at_the_restarts_commit)
    monkeypatch.setattr(driven, "start", start)
    driven.thread.start()
    try:
        wait_for(lambda: driven.batches and driven.caught_up(0), "a first group commit")
        v1 = driven.store.latest_job_model()
        driven.store.write_job_model(dataclasses.replace(v1, version=2))  # no expansion: at once
        wait_for(hung.is_set, "the restart's commit")
        wait_for(lambda: job.lease_lost is not None or driven.result, "the driver fenced")
        lease.resume_polling()
        wait_for(lambda: len(driven.queries) == 2 or driven.result, "the query restarted")
        assert driven.result == {}, f"the driver ended: {driven.result}"
        assert job.lifecycle.version == 2 and job.model.version == 2
        before = len(driven.batches)
        wait_for(lambda: driven.caught_up(before), "group commits on v2")
        driven.alive()
        assert not driven.queries[0].isActive
        # nothing twice: each batch starts where the one before ended (one checkpoint)
        for (_, end, _), (start, _, _) in zip(driven.batches, driven.batches[1:], strict=False):
            assert start == end
        proc = driven.store.processors()["p-1"]
        assert (proc["state"], proc["job_model_version"]) == ("running", 2)
    finally:
        driven.store.request_stop(2, "test over")
        driven.thread.join(30)
        job.close()
        driven.store.close()
