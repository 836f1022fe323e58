"""The job's driver (`spark.runtime.Job`) rides out a broker outage, without Spark: a real
broker (Apache Kafka on its data directory: it keeps its groups, as a production broker does)
stopped and started again on the same port, a real `KafkaCoordinatorStore`, the real lease.
The query is a stand-in for Spark's (`OffsetQuery`): one batch per poll of the driver while
it runs, restarted by ``start()`` from its checkpoint (the end of its last batch), as Spark's
query would be.

* An outage shorter than the lease: the heartbeats and group commits that fail meanwhile are
  retried; the query is never stopped; once the broker is back the group has the newest end.
* An outage longer than the lease: the driver stops its query (fenced: no batch while it does
  not hold the lease), waits as a standby and, the broker back, takes the lease again and
  starts the query anew by itself - never beside another processor.
"""

from __future__ import annotations

import functools
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import committed, create_topic

from airflow_samza_expand._testing import ApacheKafkaProcess
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.spark import runtime
from airflow_samza_expand.store import open_store

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(300)]

TTL_S = 30.0  # the active lease (the broker's session timeout)
STORE_TIMEOUT_S = 3.0  # the coordinator store's producer message.timeout, shortened
WAIT_S = 120.0


def wait_for(condition: Any, what: str, timeout_s: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)
    return value


class OffsetQuery:
    """Spark's streaming query as the driver sees it: each poll of a running query is one
    batch of one record per partition, reported in ``recentProgress`` with its end offsets."""

    def __init__(self, topic: str, checkpoint: dict[str, int], lease: Any, batches: list) -> None:
        self.topic, self.checkpoint, self.lease, self.batches = topic, checkpoint, lease, batches
        self.isActive = True
        self.recentProgress: list[dict] = []
        self.lastProgress: dict | None = None
        self.status = {"isTriggerActive": False}
        self._ended = threading.Event()

    def awaitTermination(self, timeout: float) -> bool:  # noqa: N802 - Spark's name
        if self._ended.wait(timeout):
            return True
        start = dict(self.checkpoint)
        end = {p: o + 1 for p, o in start.items()}
        self.checkpoint.update(end)
        # what the test checks: the lease this processor held while the batch ran
        self.batches.append((start, end, self.lease.is_active()))
        report = {
            "batchId": len(self.batches) - 1,
            "numInputRows": len(end),
            "durationMs": {"addBatch": 1},
            "sources": [{"endOffset": {self.topic: end}}],
        }
        self.recentProgress.append(report)
        self.lastProgress = report
        return False

    def stop(self) -> None:
        self.isActive = False
        self._ended.set()

    def exception(self) -> None:
        return None


class Driven:
    """A job attached through the runtime, run in a thread with `OffsetQuery`s."""

    def __init__(self, broker: ApacheKafkaProcess, tmp_path: Path, monkeypatch) -> None:
        self.broker = broker
        self.topic = f"orders-{tmp_path.name[-20:]}".replace("_", "-")
        self.name = f"job-{self.topic}"
        create_topic(broker.bootstrap, self.topic, 2)
        config = {"bootstrap.servers": broker.bootstrap}
        self.store = open_store("kafka", self.name, config)
        self.store.write_job_model(JobModel.initial(self.name, {self.topic: 2}))
        import airflow_samza_expand.store as store_module

        short = functools.partial(store_module.open_store, timeout_s=STORE_TIMEOUT_S)
        monkeypatch.setattr(store_module, "open_store", short)
        argv = [
            "--job-name", self.name, "--bootstrap-servers", broker.bootstrap,
            "--coordinator", "kafka", "--checkpoint-dir", str(tmp_path / "checkpoint"),
            "--processor-id", "p-1", "--ttl", str(TTL_S),
        ]  # fmt: skip
        self.job = runtime.attach(None, argv)
        self.checkpoint = {"0": 0, "1": 0}
        self.batches: list[tuple[dict, dict, bool]] = []
        self.queries: list[OffsetQuery] = []
        self.result: dict[str, Any] = {}
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> OffsetQuery:
        query = OffsetQuery(self.topic, self.checkpoint, self.job.lifecycle.lease, self.batches)
        self.queries.append(query)
        return query

    def _run(self) -> None:
        try:
            self.result["code"] = self.job.run(self.start)
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            self.result["error"] = exc

    def committed(self) -> dict[int, int]:
        return committed(self.broker.bootstrap, self.name, self.topic, 2)

    def caught_up(self, after: int) -> bool:
        """The group holds the end of a batch that ran after ``after`` batches."""
        ends = self.committed()
        return len(self.batches) > after and all(
            ends[p] >= self.batches[after][1][str(p)] for p in (0, 1)
        )

    def alive(self) -> None:
        assert self.thread.is_alive(), f"the driver ended during the outage: {self.result}"

    def outage(self, seconds: float) -> tuple[int, float]:
        """Stop the broker, wait ``seconds`` (the driver keeps polling) and start it again:
        (batches so far, how long the broker was away)."""
        began = time.monotonic()
        self.broker.stop()
        ended = threading.Event()
        ended.wait(seconds)  # the outage itself: nothing to wait on but its length
        self.alive()
        before = len(self.batches)
        self.broker.start()  # same port, same data
        return before, time.monotonic() - began


@pytest.fixture
def driven(restartable_apache_kafka, tmp_path, monkeypatch):
    broker = restartable_apache_kafka
    made = None
    try:
        made = Driven(broker, tmp_path, monkeypatch)
        made.thread.start()
        yield made
    finally:
        if made is not None:
            made.store.request_stop(1, "test over") if broker.proc else None
            made.thread.join(30)
            made.job.close()
            made.store.close()


def test_the_driver_rides_out_outages_shorter_and_longer_than_its_lease(driven):
    wait_for(lambda: driven.batches and driven.caught_up(0), "a first group commit")
    # shorter than the lease, longer than the store's message timeout: a heartbeat (and a
    # group commit) fails meanwhile, and is retried
    before, took = driven.outage(STORE_TIMEOUT_S * 2)
    assert STORE_TIMEOUT_S * 2 < took < TTL_S, took
    assert len(driven.queries) == 1 and driven.queries[0].isActive  # never stopped
    wait_for(lambda: driven.caught_up(before), "group commits after the short outage")
    wait_for(lambda: driven.store.processors()["p-1"]["state"] == "running", "a running heartbeat")
    driven.alive()

    # longer than the lease: fenced (the query stopped, no batch without the lease), then
    # the lease taken again and the query started anew, all by itself
    before, took = driven.outage(TTL_S * 1.2)
    assert not driven.queries[0].isActive, "the query ran on after its lease had expired"
    wait_for(lambda: len(driven.queries) == 2, "the query started again after the outage")
    wait_for(lambda: driven.caught_up(before), "group commits after the long outage")
    driven.alive()
    assert all(held for _, _, held in driven.batches), "a batch ran without the lease"
    # nothing twice: each batch starts where the one before ended (one checkpoint)
    for (_, end, _), (start, _, _) in zip(driven.batches, driven.batches[1:], strict=False):
        assert start == end
    proc = driven.store.processors()["p-1"]
    assert (proc["state"], proc["role"]) == ("running", "active")


def test_a_driver_whose_lease_another_processor_took_exits_3_and_starts_nothing(driven):
    """Fenced while Kafka answers and another processor is active (a hung driver, a zombie):
    the driver does not start its query again beside it; it exits 3 (`EXIT_LEASE_LOST`)."""
    from airflow_samza_expand._kafka.config import client_config
    from airflow_samza_expand.spark._lifecycle import EXIT_LEASE_LOST, Lifecycle

    wait_for(lambda: driven.batches and driven.caught_up(0), "a first group commit")
    other = Lifecycle(
        driven.store, driven.name, "p-2", client_config(driven.broker.bootstrap), ttl_s=TTL_S
    )
    try:
        other.join()
        lease = driven.job.lifecycle.lease
        lease.pause_polling()  # hung: the broker moves the lease on after the TTL
        assert other.lease.wait_until_active(timeout_s=WAIT_S)
        other.heartbeat("running")  # the active now
        lease.resume_polling()
        driven.thread.join(WAIT_S)
        assert driven.result == {"code": EXIT_LEASE_LOST}
        assert len(driven.queries) == 1 and not driven.queries[0].isActive
    finally:
        other.close()
