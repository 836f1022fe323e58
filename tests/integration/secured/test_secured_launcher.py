"""The secured mode of the Apache Kafka launcher, and a format fix it needed."""

from __future__ import annotations

import base64
import stat
import uuid
from unittest import mock

import pytest
from confluent_kafka.admin import AdminClient

from airflow_samza_expand._testing import ApacheKafkaProcess
from airflow_samza_expand._testing.apache_kafka_secured import AUTHORIZER


def test_secured_config_is_owner_only_and_names_sasl_and_the_authorizer() -> None:
    kafka = ApacheKafkaProcess(secured=True, admin_password="p4ss")
    try:
        props = kafka._write_config()
        text = props.read_text()
        assert stat.S_IMODE(props.stat().st_mode) == 0o600
        assert f"listeners=SASL_PLAINTEXT://127.0.0.1:{kafka.port}," in text
        assert "PLAINTEXT://127.0.0.1" not in text.replace("SASL_PLAINTEXT://", "")
        assert f"authorizer.class.name={AUTHORIZER}" in text
        assert "allow.everyone.if.no.acl.found=false" in text
        assert kafka.client_config["sasl.mechanism"] == "SCRAM-SHA-512"
    finally:
        kafka.close()


def test_secured_broker_refuses_an_unknown_user(secured_kafka) -> None:
    seen = []
    admin = AdminClient(
        {
            **secured_kafka.client_config,
            "sasl.username": "nobody",
            "error_cb": seen.append,
        }
    )
    with pytest.raises(Exception):  # noqa: B017 - librdkafka says _TRANSPORT here
        admin.list_topics(timeout=3)
    admin.poll(0)
    assert any("Authentication failed" in e.str() for e in seen)


def test_kraft_format_accepts_a_cluster_id_that_starts_with_a_dash(secured_kafka) -> None:
    """A random cluster id is urlsafe base64: 1 in 64 start with '-', which `-t <id>` parsed
    as an option (format failed); `--cluster-id=<id>` does not. (`secured_kafka`: only to
    skip where Apache Kafka cannot be fetched.)"""
    dash = uuid.UUID(bytes=bytes([0xFB]) + bytes(15))
    assert base64.urlsafe_b64encode(dash.bytes).decode().startswith("-")
    with mock.patch("uuid.uuid4", return_value=dash), ApacheKafkaProcess() as kafka:
        assert AdminClient(kafka.client_config).list_topics(timeout=10).brokers


def test_readme_shows_the_acl_table_of_kafka_acls() -> None:
    from pathlib import Path

    from airflow_samza_expand._kafka.acls import acl_table_markdown

    readme = (Path(__file__).resolve().parents[3] / "docs" / "deployments.md").read_text()
    assert acl_table_markdown() in readme
    assert '"sasl.mechanism": "SCRAM-SHA-512"' in readme and "job_kafka_config_id" in readme
