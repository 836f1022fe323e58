"""The Apache Kafka launcher: fetched once with Maven, ready when it serves Metadata and group
offsets, stopped by pid; a machine without Maven gets an error that names the fix."""

from __future__ import annotations

import os

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from airflow_samza_expand._testing import ApacheKafkaProcess
from airflow_samza_expand._testing.apache_kafka_process import (
    cached_libs,
    fetch_apache_kafka,
    kafka_version,
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_starts_on_loopback_serves_groups_and_stops_by_pid(tmp_path) -> None:
    if cached_libs() is None:
        pytest.skip("Apache Kafka jars not fetched (bash scripts/setup.sh fetches them)")
    kafka = ApacheKafkaProcess(data_dir=tmp_path / "data")
    with kafka:
        assert kafka.bootstrap.startswith("127.0.0.1:")
        pid = kafka.pid
        assert pid is not None and _alive(pid)
        metadata = AdminClient({"bootstrap.servers": kafka.bootstrap}).list_topics(timeout=10)
        assert [b.host for b in metadata.brokers.values()] == ["127.0.0.1"]
        consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "launcher"})
        try:  # ready means group offsets are served at once (no NOT_COORDINATOR)
            assert consumer.committed([TopicPartition("none", 0)], timeout=10)[0].offset < 0
        finally:
            consumer.close()
        assert kafka_version() in kafka.log_text()
    assert kafka.proc is None and not _alive(pid)
    assert (tmp_path / "data" / "meta.properties").exists()  # KRaft storage was formatted


def test_fetch_without_maven_names_the_fix_and_leaves_no_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no mvn
    with pytest.raises(RuntimeError, match="apt-get install maven"):
        fetch_apache_kafka()
    assert cached_libs() is None


def test_free_ports_are_drawn_below_the_ephemeral_range(tmp_path) -> None:
    """An outgoing connection never takes a port below the kernel's ephemeral range, so the
    server that binds the port a moment later finds it free (two test lanes, many clients)."""
    from airflow_samza_expand._testing.launch import ephemeral_low, free_port

    low = ephemeral_low()
    ports = {free_port() for _ in range(20)}
    assert all(1024 <= p < low for p in ports), (low, sorted(ports))
    assert len(ports) > 1  # drawn at random: two runs starting servers at once rarely collide
    odd = tmp_path / "range"
    odd.write_text("40000\t60999\n")
    assert ephemeral_low(str(odd)) == 40000
    odd.write_text("garbage")
    assert ephemeral_low(str(odd)) == 32768


def test_the_broker_jvm_takes_kafkas_performance_options_variable(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("KAFKA_JVM_PERFORMANCE_OPTS", raising=False)
    default = ApacheKafkaProcess()._java(tmp_path, "kafka.Kafka")
    assert "-XX:+UseG1GC" in default
    monkeypatch.setenv("KAFKA_JVM_PERFORMANCE_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    lean = ApacheKafkaProcess()._java(tmp_path, "kafka.Kafka")
    assert "-XX:+UseSerialGC" in lean and "-XX:TieredStopAtLevel=1" in lean
    assert "-XX:+UseG1GC" not in lean
    assert lean.index("-XX:+UseSerialGC") < lean.index("kafka.Kafka")  # JVM options, not args
