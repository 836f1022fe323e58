"""Tests on a real three-node Apache Kafka cluster (_testing/apache_kafka_cluster.py).

Every test here is marked `kafka_cluster` and, by the root conftest, `apache_ci`: scripts/test.sh
runs it in part 1 (Apache Kafka), never on the development broker. Each module starts its own
cluster (module scope, one at a time: three JVMs), stops it by pid, and restarts any node a test
killed before the next test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if Path(str(item.path)).resolve().is_relative_to(here):
            item.add_marker(pytest.mark.kafka_cluster)
            item.add_marker(pytest.mark.kafka)


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """Three KRaft nodes (replication 3, min.insync.replicas 2) on 127.0.0.1."""
    from airflow_samza_expand._testing.apache_kafka_cluster import ApacheKafkaCluster

    with ApacheKafkaCluster(3, work_dir=tmp_path_factory.mktemp("kafka-cluster")) as cluster:
        yield cluster
