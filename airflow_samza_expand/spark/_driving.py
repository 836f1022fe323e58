"""Driving a job's streaming query (`spark.runtime.Job.run`): group commits after each
committed micro-batch, fenced by the active lease; stop requests; the final commit and the
exit code. The base of `spark.runtime.Job`."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_samza_expand.core.errors import ExpansionError
from airflow_samza_expand.spark._batch_events import BatchEvents, listen
from airflow_samza_expand.spark._lifecycle import (
    EXIT_LEASE_LOST,
    STORE_UNAVAILABLE,
    LeaseLostError,
    Lifecycle,
    heartbeat_interval,
)

log = logging.getLogger("airflow_samza_expand.spark.runtime")

EXIT_FAILED = 1
EXIT_USAGE = 2
STOP_POLL_S = 1.0
POLL_S = 0.5
# The downtime of a handover runs from the old processor's last commit to the new one's first:
# poll often while stopping (stop the query once no trigger has been active for STOP_SETTLE_S)
# and until the first commit, but for at most FIRST_COMMIT_FAST_S after the start.
FAST_POLL_S = 0.05
STOP_SETTLE_S = 0.1
FIRST_COMMIT_FAST_S = 60.0
# with a batch listener (`spark._batch_events`) the watch wakes when a batch ends, then asks
# the query whether it ended this briefly
AWAIT_CHECK_S = 0.001

Offsets = dict[str, dict[str, int]]


class QueryDriver:
    """Commits, watch loop and `run` over the state a `spark.runtime.Job` sets up."""

    args: Any
    model: Any
    committed: Offsets | None
    last_batch_reported: int
    lease_lost: LeaseLostError | None
    order_check: Any
    before_count: Any  # spark._stale_before.BeforeSnapshotCount (before a snapshot)
    processor_id: str
    consumer_group: str  # the group the processed offsets are committed to
    _commit_consumer: Any
    _starting: Any
    # in-app: when a restart of the query on a newer job model was decided
    # (monotonic s; `spark.runtime.Job.poll_switch`); the watch then ends the running query
    # as it does on a stop, and `run` starts it again (`restart_query`)
    restart_due: float | None = None
    batch_events: BatchEvents | None = None  # wakes the watch when a batch ends (`run`)

    @property
    def lifecycle(self) -> Lifecycle:
        raise NotImplementedError

    def kafka_config(self) -> dict[str, str]:
        raise NotImplementedError

    def poll_switch(self) -> None:
        """The switch in place (docs/design.md 'The switch in place') (`spark.runtime.Job`);
        nothing by default."""

    def restart_query(self, query: Any) -> Any:
        """In-app: the query started again on the newer job model, ``query``
        having ended (`spark.runtime.Job`)."""
        raise NotImplementedError

    # offsets ---------------------------------------------------------------------------------

    def guard(self, what: str = "writing a batch") -> None:
        """LeaseLostError unless the broker confirms this processor still holds the lease."""
        try:
            self.lifecycle.guard(what)
        except LeaseLostError as exc:
            self.lease_lost = exc
            raise

    def commit_offsets(self, end: Mapping[str, Mapping[Any, int]]) -> None:
        """Commit a finished batch's end offsets for the job's consumer group (fenced)."""
        from airflow_samza_expand._kafka.clients import Consumer
        from airflow_samza_expand.spark._source import commit_group_offsets

        offsets = {t: {str(p): int(o) for p, o in ps.items()} for t, ps in end.items()}
        if offsets == self.committed or not offsets:
            return
        self.lifecycle.guard(f"committing offsets {json.dumps(offsets, sort_keys=True)}")
        if self._commit_consumer is None:
            config = self.kafka_config()
            config.update({"group.id": self.consumer_group, "enable.auto.commit": "false"})
            self._commit_consumer = Consumer(config)
        commit_group_offsets(self._commit_consumer, offsets)
        self.committed = offsets
        log.info("committed group %r offsets %s", self.consumer_group, json.dumps(offsets))
        if self.order_check is not None:  # stale placements beyond the barrier
            self.order_check.after_commit(offsets)
        if self.before_count is not None:  # ... and before an expansion's snapshot
            self.before_count.after_commit(offsets)

    def commit_progress(self, query: Any) -> None:
        """Commit the newest finished batch's end offsets; record new progress reports.

        Reads Spark's newest report only (``lastProgress``): ``recentProgress`` holds up to 100
        reports, each with every partition's offsets, and Python parses them all at each read
        (60 ms for 9 reports at 256 partitions, at each poll of the watch). It is read only
        for a ``--progress-file`` that missed more than one batch since the last poll."""
        progress = query.lastProgress
        if progress is None:
            return
        if progress["batchId"] > self.last_batch_reported:
            if self.args.progress_file:
                self._write_progress(query, progress)
            self.last_batch_reported = progress["batchId"]
        if self.model is not None:
            self.commit_offsets(end_offsets(progress["sources"], self.model.partition_counts()))

    def _write_progress(self, query: Any, newest: Mapping[str, Any]) -> None:
        """Append the reports of the batches after the last one written, up to ``newest``."""
        from airflow_samza_expand.spark._outputs import progress_summary

        reports = [newest]
        if newest["batchId"] > self.last_batch_reported + 1:  # more than one since the last poll
            reports = [
                r
                for r in query.recentProgress
                if self.last_batch_reported < r["batchId"] <= newest["batchId"]
            ]
        with open(self.args.progress_file, "a", encoding="utf-8") as handle:
            for report in reports:
                if report["numInputRows"] or report["durationMs"].get("addBatch"):
                    handle.write(json.dumps(progress_summary(report)) + "\n")

    def try_commit_progress(self, query: Any) -> None:
        """`commit_progress`, logged instead of raised while Kafka is unreachable: the next
        commit (the same query's or the restarted one's) covers these batches."""
        try:
            self.commit_progress(query)
        except STORE_UNAVAILABLE as exc:
            log.warning("offset commit not done (Kafka unreachable), next one later: %s", exc)

    # running ---------------------------------------------------------------------------------

    def _started(self) -> Any:
        """The query started anew by the function the job handed `run` (`spark.runtime.Job`)."""
        raise NotImplementedError

    def run(self, query: Any) -> int:
        """Drive ``query`` until it ends or a stop is requested; the exit code."""
        life = self.lifecycle
        self._starting.close()
        self.batch_events = listen(getattr(self, "spark", None))
        try:
            life.try_heartbeat("running")
            try:
                while True:
                    try:
                        failed = self.watch(query)
                    except LeaseLostError as exc:  # a commit's confirm: fenced
                        self.lease_lost, failed = exc, True
                    if self.lease_lost is not None:
                        resumed = self.resume(query)
                        if resumed is None:
                            break
                        query, failed = resumed, False
                        continue
                    if failed or life.stop_event.is_set() or self.restart_due is None:
                        break
                    try:
                        query = self.restart_query(query)  # in-app: same application and lease
                    except LeaseLostError as exc:  # its last commit's confirm: fenced
                        self.lease_lost = exc  # resumed as above, then restarted on vN+1
            finally:
                if query.isActive:
                    query.stop()
                if self.batch_events is not None:
                    self.batch_events.close()
                    self.batch_events = None
        except BaseException:
            life.try_heartbeat("failed")
            raise
        if self.lease_lost is not None:
            log.error("%s", self.lease_lost)
            life.try_heartbeat("stopped")
            return EXIT_LEASE_LOST
        if life.lease is not None and not life.lease.is_active() and life.stop_event.is_set():
            # stopped while fenced: nothing more is committed without the lease
            life.try_heartbeat("stopped")
            return 0
        try:
            self.commit_progress(query)
        except LeaseLostError as exc:
            log.error("%s", exc)
            life.try_heartbeat("stopped")
            return EXIT_LEASE_LOST
        except ExpansionError as exc:  # --on-stale-placement fail (spark._stale)
            life.try_heartbeat("failed")
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except Exception as exc:
            log.error("final offset commit failed: %s", exc)
            failed = True
        life.try_heartbeat("failed" if failed else "stopped")
        life.release()  # the handover: a standby takes the lease now
        log.info(
            "job %r %s (job model v%d)",
            self.args.job_name,
            "failed" if failed else "stopped",
            self.model.version if self.model else 0,
        )
        return EXIT_FAILED if failed else 0

    def resume(self, query: Any) -> Any | None:
        """Fenced (the lease lost, ``query`` stopped): wait as a standby for the lease again -
        Kafka unreachable past the TTL ends this way - and start the query anew on the newest
        job model the job may run (in-app: one whose barrier has passed). None: another
        processor is active (exit 3), a stop came, or the job handed `run` a started query
        (it can only be restarted by its deployment: exit 3)."""
        life = self.lifecycle
        if query.isActive:
            query.stop()  # fenced: no batch more without the lease
        if getattr(self, "start_query", None) is None or not life.use_lease:
            return None
        log.warning("%s; waiting as a standby for the lease again", self.lease_lost)
        from airflow_samza_expand.spark._resume import wait_for_lease_again

        outcome = wait_for_lease_again(life)
        if outcome != "regained":
            if outcome == "stopped":
                self.lease_lost = None
            return None
        self.lease_lost = None
        self.poll_store()  # in-app: a newer job model whose barrier has passed
        if self.restart_due is not None:
            return self.restart_query(query)
        self.try_commit_progress(query)  # the fenced query's finished batches, leased again
        started = self._started()
        log.info("job %r: processor %s started its query again on job model v%d after a lost "
                 "lease", self.args.job_name, self.processor_id, life.version)  # fmt: skip
        life.try_heartbeat("running")
        return started

    def watch(self, query: Any) -> bool:
        """Poll the query until it ends or a requested stop is complete; True if it failed."""
        life = self.lifecycle
        next_stop_poll = time.monotonic() + STOP_POLL_S
        interval = heartbeat_interval(life.ttl_s)
        next_heartbeat = time.monotonic() + interval
        fast_until = time.monotonic() + FIRST_COMMIT_FAST_S
        in_flight: int | None = None  # the last batch once a stop is requested
        while True:
            first_commit_due = self.committed is None and time.monotonic() < fast_until
            fast = life.stop_event.is_set() or first_commit_due or self.restart_due is not None
            try:
                ended = self._await(query, FAST_POLL_S if fast else POLL_S)
            except Exception:  # noqa: BLE001 - the query failed: its exception is below
                ended = True
            if ended:
                error = query.exception()
                if error is not None and self.lease_lost is None and life.use_lease:
                    try:  # a zombie's query fails on the checkpoint its successor writes
                        life.guard("reporting the query's failure")
                    except LeaseLostError as exc:
                        self.lease_lost = exc
                if self.lease_lost is not None:
                    return True
                if error is not None:
                    log.error("streaming query failed: %s", error)
                    return True
                return False
            if life.use_lease and (not life.lease.is_active() or life.lease.epoch != life.epoch):
                self.lease_lost = LeaseLostError(
                    f"processor {self.processor_id} lost the active lease of job "
                    f"{self.args.job_name!r} (epoch {life.epoch}): stopping its query without "
                    "committing more"
                )
                query.stop()
                return True
            self.try_commit_progress(query)  # committed again after the next batch, or poll
            now = time.monotonic()
            if life.stop_event.is_set() or self.restart_due is not None:
                seen = life.stop_seen_at if life.stop_event.is_set() else self.restart_due
                assert seen is not None
                # the batch in flight when the stop came, if any, is the last one: a source
                # without the stop gate (Spark's) keeps batches back to back, so stop once it
                # is done; a batch started since is cut short (the next processor - or, in-app,
                # the restarted query - redoes it from the checkpoint)
                if in_flight is None:
                    in_flight = self.last_batch_reported + 1
                idle = not query.status["isTriggerActive"]
                if (idle and now - seen > STOP_SETTLE_S) or (self.last_batch_reported >= in_flight):
                    log.info(
                        "%s: %s, stopping the query",
                        "stop" if life.stop_event.is_set() else "in-app restart",
                        "no batch in flight" if idle else f"batch {in_flight} done",
                    )
                    query.stop()
                    return False
                continue
            if now >= next_stop_poll:
                self.poll_store()
                next_stop_poll = now + STOP_POLL_S
            if now >= next_heartbeat:
                life.try_heartbeat("running")
                next_heartbeat = now + interval

    def _await(self, query: Any, timeout_s: float) -> bool:
        """Wait until a batch ends (`spark._batch_events`) or ``timeout_s`` passes; whether
        ``query`` has ended (its failure raised, as by ``awaitTermination``)."""
        if self.batch_events is None:
            return bool(query.awaitTermination(timeout_s))
        self.batch_events.wait(timeout_s)
        return bool(query.awaitTermination(AWAIT_CHECK_S))

    def poll_store(self) -> None:
        """The switch in place and the stop request, from the coordinator store. A store the
        broker cannot serve for now (a restart, a leader election) is read again at the next
        poll; the query runs on meanwhile, as the source's reads ride the outage out."""
        try:
            self.poll_switch()
            self.lifecycle.check_stop()
        except STORE_UNAVAILABLE as exc:
            log.warning("coordinator store unreachable, polling it again: %s", exc)


def end_offsets(sources: Sequence[Any], counts: Mapping[str, int]) -> Offsets:
    """The end offsets of the job model's topics over a progress report's sources."""
    merged: Offsets = {}
    for source in sources:
        end = source["endOffset"]
        if isinstance(end, str):
            try:
                end = json.loads(end)
            except ValueError:
                continue
        if not isinstance(end, dict):
            continue
        for topic, parts in end.items():
            if topic in counts and isinstance(parts, dict):
                merged.setdefault(topic, {}).update({str(p): int(o) for p, o in parts.items()})
    return merged


__all__ = ["EXIT_FAILED", "EXIT_USAGE", "QueryDriver", "end_offsets"]
