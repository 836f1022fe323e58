"""The processor lifecycle of the job: heartbeats, stop, active lease, standby.

Why: docs/design.md 'Processors and the active lease'.

* Heartbeats carry the role (``active``/``standby``), the state, the job model version and the
  TTL; dead processor records (silent past their TTL) are tombstoned when the job starts.
* With the lease (the default) the processor joins the job's lease group
  (`_kafka.membership.ActiveLease`) and processes only while it holds partition 0 of it. Until
  then it is a standby: it heartbeats ``standby``, reads no input and has warmed up (SparkSession,
  Python workers and imports, Kafka metadata), so it starts its query within a moment of
  getting the lease.
* A standby launched for job model vN+1 (``min_version``) never processes an older one: holding
  the lease, it waits until the coordinator's newest job model is >= vN+1.
* The active confirms the lease with the broker (`ActiveLease.confirm`, fenced by generation)
  before it writes a batch and before it commits offsets; a lost lease raises
  `LeaseLostError` and the job stops without committing anything more.
* On a stop request for its version the job finishes its batch, commits, heartbeats
  ``stopped`` and releases the lease (the handover to the standby).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaException

from airflow_samza_expand._kafka.errors import KafkaUnavailableError
from airflow_samza_expand.core._liveness import (
    CAPABILITY_COUNTS_STALE,
    CAPABILITY_IN_APP,
    CAPABILITY_IN_PLACE,
    CAPABILITY_STANDBY,
    DEFAULT_TTL_S,
    ROLE_ACTIVE,
    ROLE_STANDBY,
    dead_processors,
)
from airflow_samza_expand.core.model import JobModel

if TYPE_CHECKING:
    from airflow_samza_expand.store import CoordinatorStore

log = logging.getLogger("airflow_samza_expand.spark._lifecycle")

EXIT_LEASE_LOST = 3
MAX_IDLE_HEARTBEAT_S = 10.0
VERSION_POLL_S = 0.5
# holding the lease, waiting for vN+1 (the handover): the write is the go signal, look often
LEASED_VERSION_POLL_S = 0.1
# what a coordinator store read or write (a heartbeat) and a group commit raise while the
# broker restarts, elects leaders or is unreachable: the processor tries again at its next poll
# instead of dying (docs/operations.md, "A broker outage")
STORE_UNAVAILABLE: tuple[type[Exception], ...] = (KafkaUnavailableError, KafkaException)


_UNSEEN = object()


class LeaseLostError(Exception):
    """The active processor lost the job's active lease: stop before committing more."""


def heartbeat_interval(ttl_s: float) -> float:
    """How often to heartbeat so that a live processor never looks dead (a third of the TTL)."""
    return min(MAX_IDLE_HEARTBEAT_S, ttl_s / 3)


class Lifecycle:
    """A processor's coordinator-side life: heartbeats, stop requests, the active lease."""

    def __init__(
        self,
        store: CoordinatorStore,
        job_name: str,
        processor_id: str,
        kafka_config: Mapping[str, str],
        *,
        ttl_s: float = DEFAULT_TTL_S,
        use_lease: bool = True,
    ) -> None:
        self.store = store
        self.job_name = job_name
        self.processor_id = processor_id
        self.kafka_config = dict(kafka_config)
        self.ttl_s = ttl_s
        self.use_lease = use_lease
        self.lease: Any = None
        self.coverage: Any = None  # spark._coverage.CoverageWatch once the job model is known
        self.order_check: Any = None  # spark._stale.OrderCheck with --barrier-offsets
        self.in_place = False  # the query reads with the provider's reader (in place)
        # the runtime holds the function starting the query, read with Spark's own Kafka
        # source: it restarts the query on a newer job model itself (in-app)
        self.in_app = False
        self.consumer_group: str | None = None  # advertised in the heartbeat (the barrier reads it)
        self.counts_stale = False  # ... and counts stale placements before a snapshot (1.5)
        self.epoch = 0
        self.version = 0
        self.store_lock = threading.Lock()
        self.stop_event = threading.Event()
        self.stop_seen_at: float | None = None
        # the stop record found at the first look: it stopped the processors running when it
        # was written, not this one started after it (a cluster manager's restart) - this one
        # is *parked*: it processes nothing, heartbeats ``stopped`` and goes on once a newer
        # job model is written or the record cleared (docs/operations.md, "Driver restarts")
        self.stop_at_start: Any = _UNSEEN
        self.parked = False
        self._not_yet: tuple[int, str] | None = None  # the last "not started on yet" logged
        self.gate_dir = tempfile.mkdtemp(prefix="samza-expand-gate-")
        self.gate_path = os.path.join(self.gate_dir, "stop")
        self.report_dir = os.path.join(self.gate_dir, "stale")  # the reader's stale counts

    # heartbeats and records -------------------------------------------------------------------

    def heartbeat(self, state: str, role: str | None = None) -> None:
        """Heartbeat ``state``; the role (default) is ``standby`` while waiting, else ``active``;
        with the input partitions the job model does not cover (spark._coverage) and the stale
        placements its order check counted (per key), when there are any. A standby warming up
        heartbeats ``starting`` as role ``standby``."""
        uncovered = self.coverage.poll() if self.coverage is not None else {}
        summary = self.order_check.summary if self.order_check is not None else None
        with self.store_lock:
            self.store.heartbeat(
                self.processor_id,
                self.version,
                state,
                role=role or (ROLE_STANDBY if state == "standby" else ROLE_ACTIVE),
                ttl_s=self.ttl_s,
                uncovered=uncovered or None,
                stale_placements=summary.counts() if summary and summary.records else None,
                capabilities=self.capabilities(),
                consumer_group=self.consumer_group,
            )

    def capabilities(self) -> list[str]:
        """Capabilities (docs/design.md 'How a restart is chosen'): with the lease it can wait as a
        warm standby (--standby); with the provider's reader it can switch in place (Spark's own
        Kafka source cannot change ``assign`` in a running query) and counts stale placements
        before an expansion's
        snapshot in its batches (`spark._stale_before`: the barrier then does not scan); handed
        the function that starts its query and reading with Spark's own source, it restarts
        that query on a newer job model inside the application (in-app)."""
        return (
            [CAPABILITY_STANDBY] * self.use_lease
            + [CAPABILITY_IN_PLACE] * self.in_place
            + [CAPABILITY_IN_APP] * (self.in_app and not self.in_place)
            + [CAPABILITY_COUNTS_STALE] * self.counts_stale
        )

    @contextlib.contextmanager
    def beating(self, state: str, role: str | None = None) -> Iterator[None]:
        """Heartbeat ``state`` from a background thread while a long step (JVM start, warm-up,
        query start) keeps the main thread busy, so the processor never looks dead."""
        done = threading.Event()

        def beat() -> None:
            while not done.wait(heartbeat_interval(self.ttl_s)):
                try:
                    self.heartbeat(state, role)
                except Exception as exc:  # noqa: BLE001 - the next beat tries again
                    log.warning("heartbeat failed: %s", exc)

        self.heartbeat(state, role)
        thread = threading.Thread(target=beat, name=f"heartbeat-{state}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join(5)

    def try_heartbeat(self, state: str, role: str | None = None) -> bool:
        """`heartbeat`, logged instead of raised while Kafka is unreachable (False)."""
        try:
            self.heartbeat(state, role)
        except STORE_UNAVAILABLE as exc:
            log.warning("heartbeat %r not written (Kafka unreachable), next one later: %s",
                        state, exc)  # fmt: skip
            return False
        return True

    def reap_dead(self) -> list[str]:
        """Tombstone the records of processors silent past their TTL; return their ids."""
        with self.store_lock:
            dead = dead_processors(self.store.processors())
            for pid, status in sorted(dead.items()):
                if pid == self.processor_id:
                    continue
                log.info("processor %s is dead: removing its record", status.describe())
                self.store.remove_processor(pid)
        return sorted(p for p in dead if p != self.processor_id)

    # stop -------------------------------------------------------------------------------------

    def check_stop(self) -> bool:
        """True once a stop for this processor's version (or a newer one) is requested."""
        if self.stop_event.is_set():
            return True
        with self.store_lock:
            request = self.store.stop_request()
        if self.stop_at_start is _UNSEEN:
            self.stop_at_start = request
        if not request or int(request.get("version", 0)) < self.version:
            self.parked = False
            return False  # none, or a stale request for an older job model
        if request == self.stop_at_start:
            if not self.parked:
                log.info(
                    "processor %s started after the stop of job model v%s (requested at %s): "
                    "parked - it processes nothing until a newer job model is written or the "
                    "stop record is cleared",
                    self.processor_id, request.get("version"), request.get("requested_at"),
                )  # fmt: skip
            self.parked = True
            return False
        log.info(
            "stop requested for job model v%s (this processor: v%s, reason %r): finishing the "
            "current batch",
            request.get("version"),
            self.version,
            request.get("reason"),
        )
        with open(self.gate_path, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(request))
        self.stop_seen_at = time.monotonic()
        self.stop_event.set()
        return True

    # the active lease -------------------------------------------------------------------------

    def join(self) -> None:
        """Join the job's lease group (no-op without the lease); note the stop record found
        now (a processor started after a stop is parked by it, not stopped)."""
        if self.stop_at_start is _UNSEEN:
            with self.store_lock:
                self.stop_at_start = self.store.stop_request()
        if not self.use_lease or self.lease is not None:
            return
        from airflow_samza_expand._kafka.membership import ActiveLease

        self.lease = ActiveLease(
            self.kafka_config, self.job_name, self.processor_id, ttl_s=self.ttl_s
        ).join()

    def wait_to_process(
        self, min_version: int, on_idle: Callable[[], None] | None = None
    ) -> JobModel | None:
        """Block as a standby until this processor holds the lease and the newest job model is
        >= ``min_version``; return that model, or None when a stop for it came first."""
        interval = heartbeat_interval(self.ttl_s)
        announced: tuple[str, int] | None = None
        next_beat = 0.0
        while True:
            # A stop first: a standby of vN that gets the lease as vN stops (a hot standby,
            # beside the handover's vN+1 one) must not start on vN; it ends instead.
            try:
                if self.check_stop():
                    return None
                active = not self.use_lease or self.lease.is_active()
                model = self.runnable_model(min_version) if active else None
            except STORE_UNAVAILABLE as exc:
                log.warning("coordinator store unreachable, reading it again shortly: %s", exc)
                time.sleep(VERSION_POLL_S)
                continue
            stopped_version = int(self.stop_at_start.get("version", 0)) if self.parked else 0
            if model is not None and model.version <= stopped_version:
                model = None  # parked: the stopped version is not run again
            if model is not None and model.version >= min_version:
                self.parked = False
                self.version = model.version
                self.epoch = self.lease.epoch if self.use_lease else 0
                return model
            why = ("version", min_version) if active else ("lease", 0)
            if why != announced:
                announced = why
                if active:
                    log.info(
                        "processor %s holds the lease of job %s but the newest job model is "
                        "v%s: waiting for v%d (a standby never processes an older one)",
                        self.processor_id,
                        self.job_name,
                        model.version if model else None,
                        min_version,
                    )
                else:
                    log.info(
                        "processor %s is a standby of job %s: waiting for the active lease",
                        self.processor_id,
                        self.job_name,
                    )
            now = time.monotonic()
            if now >= next_beat:
                self.heartbeat("stopped" if self.parked else "standby", ROLE_STANDBY)
                next_beat = now + interval
            if on_idle is not None:
                on_idle()
            if self.use_lease and not active:
                self.lease.wait_until_active(timeout_s=min(interval, VERSION_POLL_S * 2))
            else:
                time.sleep(LEASED_VERSION_POLL_S if self.use_lease else VERSION_POLL_S)

    def runnable_model(self, min_version: int) -> JobModel | None:
        """The newest job model >= ``min_version`` the processor may start on: one whose
        expansion's barrier has passed (`spark._switch.barrier_passed`, with the job's group
        commits) - a driver started again in the middle of an in-app expansion resumes on vN
        and restarts its query on vN+1 once the barrier passed; None: none yet."""
        from airflow_samza_expand.spark._start_position import group_start_offsets
        from airflow_samza_expand.spark._switch import barrier_passed

        model = self.store.latest_job_model()
        committed: dict[str, dict[str, int]] | None = None
        while model is not None and model.version >= min_version:
            ready, why = barrier_passed(self.store, model.version, committed)
            if not ready and committed is None and self.consumer_group:
                starts = group_start_offsets(
                    self.kafka_config, self.consumer_group, model.partition_counts()
                )
                committed = {
                    t: {str(p): o for p, o in ps.items() if o is not None}
                    for t, ps in starts.items()
                }
                ready, why = barrier_passed(self.store, model.version, committed)
            if ready:
                return model
            if self._not_yet != (model.version, why):
                self._not_yet = (model.version, why)
                log.info("job model v%d is written but not started on yet: %s", model.version, why)
            model = self.store.job_model(model.version - 1)
        return None

    def guard(self, what: str) -> None:
        """Raise LeaseLostError unless the broker confirms this processor's lease (same epoch)."""
        if not self.use_lease:
            return
        if not self.lease.confirm(self.epoch):
            raise LeaseLostError(
                f"processor {self.processor_id} lost the active lease of job {self.job_name!r} "
                f"(epoch {self.epoch}) before {what}: stopping without committing more"
            )

    def release(self) -> None:
        """Give the lease up at once (after the last committed batch)."""
        if self.lease is not None:
            self.lease.release()
            log.info(
                "processor %s released the active lease of job %s", self.processor_id, self.job_name
            )

    def close(self) -> None:
        if self.lease is not None:
            self.lease.close()
            self.lease = None
        shutil.rmtree(self.gate_dir, ignore_errors=True)  # stop gate, switch file, reports


def warm_up(spark: Any, processor_spec: str) -> float:
    """Start what a first batch would start: Python workers with Arrow/pandas and the processor
    imports, a tiny grouped job. Returns the seconds it took."""
    started = time.monotonic()
    from airflow_samza_expand.spark._processor import load_processor

    load_processor(processor_spec)

    def touch(batches: Any) -> Any:
        import pandas  # noqa: F401 - import what the stateful function imports

        from airflow_samza_expand.spark import _state  # noqa: F401

        yield from batches

    frame = spark.range(0, 64, numPartitions=2).selectExpr("id % 4 AS key", "id")
    frame.mapInPandas(touch, frame.schema).groupBy("key").count().collect()
    return time.monotonic() - started


__all__ = [
    "EXIT_LEASE_LOST",
    "LeaseLostError",
    "Lifecycle",
    "heartbeat_interval",
    "warm_up",
]
