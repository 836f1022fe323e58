"""Secured Apache Kafka for tests: SASL_PLAINTEXT + SCRAM-SHA-512, ACLs enforced.

* `secured_kafka` (session): one Apache Kafka node in secured mode (ApacheKafkaProcess
  secured=True), started once on 127.0.0.1 and stopped by pid; its admin is a super-user.
* `admin_config`: the admin's librdkafka settings.
* `principal(rules)`: a new SCRAM user holding exactly `rules` ((resource, name, pattern,
  operation) tuples, e.g. from kafka.acls.resolve); returns its librdkafka settings.
* `secured_topic(prefix, partitions)`: a topic created by the admin.

Every test here is marked `secured` and `kafka`.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

from airflow_samza_expand._testing.apache_kafka_secured import (
    create_scram_user,
    grant,
    new_password,
    sasl_client_config,
)

Rule = tuple[str, str, str, str]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if Path(str(item.path)).resolve().is_relative_to(here):
            item.add_marker(pytest.mark.secured)
            item.add_marker(pytest.mark.kafka)


@pytest.fixture(scope="session")
def secured_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from airflow_samza_expand._testing import ApacheKafkaProcess
    from airflow_samza_expand._testing.apache_kafka_process import cached_libs

    if cached_libs() is None and not shutil.which("mvn"):
        pytest.skip("Apache Kafka needs Maven (mvn) to fetch it once - apt-get install maven")
    log_path = Path(tmp_path_factory.mktemp("secured-kafka")) / "kafka.log"
    kafka = ApacheKafkaProcess(secured=True, log_path=log_path)
    kafka.start()
    try:
        yield kafka
    finally:
        kafka.close()


@pytest.fixture
def admin_config(secured_kafka: object) -> dict[str, str]:
    return dict(secured_kafka.client_config)  # type: ignore[attr-defined]


@pytest.fixture
def principal(secured_kafka: object, admin_config: dict[str, str]) -> Callable[..., dict[str, str]]:
    def make(rules: Iterable[Rule], name: str = "u") -> dict[str, str]:
        user = f"{name}-{uuid.uuid4().hex[:8]}"
        password = new_password()
        create_scram_user(admin_config, user, password)
        grant(admin_config, f"User:{user}", list(rules))
        return sasl_client_config(secured_kafka.bootstrap, user, password)  # type: ignore[attr-defined]

    return make


@pytest.fixture
def secured_topic(admin_config: dict[str, str]) -> Callable[..., str]:
    from airflow_samza_expand._kafka.admin import KafkaAdmin

    def make(prefix: str = "t", partitions: int = 2, config: dict | None = None) -> str:
        topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
        with KafkaAdmin(admin_config) as admin:
            admin.ensure_topic(topic, partitions, config, replication_factor=1)
        return topic

    return make
