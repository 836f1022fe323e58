"""A SASL authentication failure is named as one, not as "brokers unreachable".

The development broker does not speak SASL, so a SASL_PLAINTEXT client gets librdkafka's real
``_AUTHENTICATION`` error ("SASL Handshake not supported by broker") through its error_cb.
The admin and the store raise KafkaAuthenticationError (a refusal, never retried) while the
blocking call is still inside its timeout; the message names no credential.
"""

from __future__ import annotations

import pytest

from airflow_samza_expand._kafka.admin import KafkaAdmin, KafkaUnavailableError
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand.core.errors import ExpansionError, KafkaAuthenticationError
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

PASSWORD = "hunter2-do-not-log"


@pytest.fixture
def sasl_config(dev_broker):
    return client_config(
        dev_broker.bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_username="svc",
        sasl_password=PASSWORD,
    )


def check(exc: BaseException) -> None:
    assert isinstance(exc, ExpansionError) and not isinstance(exc, KafkaUnavailableError)
    text = str(exc)
    assert "refused authentication" in text and "SASL" in text
    assert "check the credentials" in text and PASSWORD not in text


def test_admin_names_an_authentication_failure(sasl_config):
    admin = KafkaAdmin(sasl_config, timeout_s=300)  # far beyond the test: it must not wait
    with pytest.raises(KafkaAuthenticationError) as caught:
        admin.partition_counts(["orders"])
    check(caught.value)
    admin.close()


def test_store_names_an_authentication_failure(sasl_config):
    store = KafkaCoordinatorStore(sasl_config, "job-auth", timeout_s=300)
    with store, pytest.raises(KafkaAuthenticationError) as caught:
        store.latest_job_model()
    check(caught.value)


def test_an_unreachable_broker_is_still_retryable():
    config = client_config(
        "127.0.0.1:9",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_username="svc",
        sasl_password=PASSWORD,
    )
    admin = KafkaAdmin(config, timeout_s=2)
    with pytest.raises(KafkaUnavailableError, match="reachable") as caught:
        admin.partition_counts(["orders"])
    assert PASSWORD not in str(caught.value)
