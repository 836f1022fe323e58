"""Fixtures of the store tests: one factory of coordinator stores per kind (Kafka, files),
a record factory, a gate that holds every contender at its write until all arrive, and a
settable clock for the lease rules."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

import pytest

from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand.core import _lease as lease_rules
from airflow_samza_expand.core._clock import now_iso, utc_now
from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus
from airflow_samza_expand.store._files import FileCoordinatorStore
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

Store = KafkaCoordinatorStore | FileCoordinatorStore


@pytest.fixture(params=["kafka", "files"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def make_store(
    store_kind: str, request: pytest.FixtureRequest, tmp_path, unique_topic
) -> Iterator[Callable[[], Store]]:
    """Factory of stores of one job (each its own writer, as two processes would be)."""
    job = unique_topic("job")
    made: list[Store] = []

    def make() -> Store:
        if store_kind == "kafka":
            config = client_config(request.getfixturevalue("kafka_bootstrap"))
            store: Store = KafkaCoordinatorStore(config, job, timeout_s=15)
        else:
            store = FileCoordinatorStore(str(tmp_path / "coordinator"), job)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


def record(job: str, expansion_id: str = "exp-1", **changes: object) -> ExpansionRecord:
    stamp = now_iso()
    base = ExpansionRecord(
        expansion_id=expansion_id,
        job_name=job,
        base_version=1,
        target_version=2,
        plan={"counts_after": {"orders": 4}, "counts_before": {"orders": 2}},
        status=ExpansionStatus.PLANNED,
        owner="airflow:dag/run-1",
        created_at=stamp,
        updated_at=stamp,
    )
    return dataclasses.replace(base, **changes)


class WriteGate:
    """Holds the first write of each gated store until `parties` stores have reached theirs."""

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=60)
        self.arrived = 0
        self._lock = threading.Lock()

    def gate(self, store: Store) -> None:
        if isinstance(store, KafkaCoordinatorStore):
            target, name = store.backend.io, "produce"
        else:
            target, name = store.backend.files, "create_exclusive"
        original = getattr(target, name)
        first = [True]

        def gated(*args, **kwargs):
            if first[0]:
                first[0] = False
                with self._lock:
                    self.arrived += 1
                self.barrier.wait()
            return original(*args, **kwargs)

        setattr(target, name, gated)


class FakeClock:
    """`core._lease`'s clock, moved by the test (no sleeping)."""

    def __init__(self) -> None:
        self.now = utc_now()

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(lease_rules, "utc_now", fake)
    return fake
