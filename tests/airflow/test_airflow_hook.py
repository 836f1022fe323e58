"""SamzaExpandKafkaHook: librdkafka settings from the connection extra, secrets never logged."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from airflow_samza_expand.airflow.hooks import SamzaExpandKafkaHook

SECURE_EXTRA = {
    "bootstrap.servers": "broker-1:9093,broker-2:9093",
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "svc-expand",
    "sasl.password": "hunter2-very-secret",
    "ssl.ca.location": "/etc/ssl/ca.pem",
    "ssl.key.password": "key-secret-42",
}


@pytest.fixture
def secure_conn(monkeypatch, airflow_home):
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_SECURE", json.dumps({"conn_type": "kafka", "extra": SECURE_EXTRA})
    )
    return "kafka_secure"


def test_security_settings_pass_through_and_secrets_are_not_logged(secure_conn, caplog, capfd):
    hook = SamzaExpandKafkaHook(kafka_config_id=secure_conn)
    with caplog.at_level(logging.DEBUG):
        config = hook.client_config()
    assert config == SECURE_EXTRA
    out, err = capfd.readouterr()
    logged = caplog.text + out + err
    assert "svc-expand" not in logged  # sasl.* is redacted entirely
    assert "hunter2-very-secret" not in logged and "key-secret-42" not in logged
    assert "SASL_SSL" in logged and "broker-1:9093" in logged


def test_async_config_matches_the_sync_one(secure_conn):
    hook = SamzaExpandKafkaHook(kafka_config_id=secure_conn)
    assert asyncio.run(hook.aclient_config()) == hook.client_config()


def test_missing_bootstrap_servers_is_a_clear_error(monkeypatch, airflow_home):
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_EMPTY", json.dumps({"conn_type": "kafka", "extra": {"acks": "all"}})
    )
    hook = SamzaExpandKafkaHook(kafka_config_id="kafka_empty")
    with pytest.raises(ValueError, match="bootstrap.servers"):
        asyncio.run(hook.aclient_config())


def test_unlisted_callbacks_are_refused(monkeypatch, airflow_home):
    extra = {"bootstrap.servers": "b:9092", "error_cb": "os.system"}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_CB", json.dumps({"conn_type": "kafka", "extra": extra}))
    with pytest.raises(ValueError, match="Refusing to resolve Kafka callback"):
        SamzaExpandKafkaHook(kafka_config_id="kafka_cb").client_config()


@pytest.mark.kafka
def test_hook_builds_working_clients(kafka_conn, job):
    j = job(2)
    hook = SamzaExpandKafkaHook()
    admin = hook.get_admin()
    assert admin.partition_counts([j.topic]) == {j.topic: 2}
    store = hook.get_coordinator_store(j.name)
    try:
        assert store.latest_job_model().version == 1
    finally:
        store.close()
    ok, message = hook.test_connection()
    assert ok, message
