"""Root fixtures: Kafka for tests - the development broker, or a real cluster.

* `kafka_bootstrap` (session): bootstrap servers. KAFKA_BOOTSTRAP_SERVERS when set (a real
  cluster), else the development broker started once per session as a subprocess on a free
  127.0.0.1 port and stopped at session end.
* `dev_broker`: the development broker handle (`.bootstrap`, `.faults`, `.log_text()`); skips
  the test on a real cluster. Fault rules are cleared after each test.
* `unique_topic`: factory `unique_topic(prefix="t") -> str` of collision-free topic names.

Tests that use these fixtures are marked `kafka` automatically.
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Callable, Iterator

import pytest

log = logging.getLogger(__name__)

KAFKA_FIXTURES = {"kafka_bootstrap", "dev_broker", "unique_topic"}


def real_cluster_bootstrap() -> str | None:
    """KAFKA_BOOTSTRAP_SERVERS if the tests run against a real cluster, else None."""
    return os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or None


@pytest.fixture(scope="session")
def _dev_broker_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object | None]:
    if real_cluster_bootstrap():
        yield None
        return
    from airflow_samza_expand.testing import DevBrokerProcess

    log_path = tmp_path_factory.mktemp("dev-broker") / "broker.log"
    broker = DevBrokerProcess(log_path=log_path)
    broker.start()
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture(scope="session")
def kafka_bootstrap(_dev_broker_process: object | None) -> str:
    """Bootstrap servers of the Kafka the tests use."""
    real = real_cluster_bootstrap()
    if real:
        return real
    assert _dev_broker_process is not None
    return _dev_broker_process.bootstrap  # type: ignore[attr-defined]


@pytest.fixture
def dev_broker(_dev_broker_process: object | None) -> Iterator[object]:
    """The development broker (`.bootstrap`, `.faults`); skipped on a real cluster."""
    if _dev_broker_process is None:
        pytest.skip("needs the development broker (KAFKA_BOOTSTRAP_SERVERS names a real cluster)")
    try:
        yield _dev_broker_process
    finally:
        if _dev_broker_process.proc is not None:  # type: ignore[attr-defined]
            _dev_broker_process.faults.clear()  # type: ignore[attr-defined]


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> Callable[..., str]:
    """Factory of collision-free topic names: unique_topic("orders") -> "orders-<test>-<hex>"."""
    test = re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name).strip("-")[:60]

    def make(prefix: str = "t") -> str:
        return f"{prefix}-{test}-{uuid.uuid4().hex[:10]}"

    return make


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if KAFKA_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.kafka)
