"""Refusals on a secured Apache Kafka: a wrong password, a missing ALTER on the input topic, a
missing DESCRIBE on the job's consumer group, a missing WRITE on the coordinator topic.

Each fails at once with a refusal (an ExpansionError: AirflowFailException in Airflow, never
retried) naming what is missing - not with the KafkaUnavailableError (retryable) that a wait
until the client's timeout would give. The clients get a long timeout (60 s), so a refusal that
came from waiting it out would show up as KafkaUnavailableError and fail the test.
"""

from __future__ import annotations

import pytest

from airflow_samza_expand._kafka.acls import resolve
from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand.core.errors import (
    ExpansionError,
    KafkaAuthenticationError,
    KafkaAuthorizationError,
)
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store import coordinator_topic, open_store
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

LONG_TIMEOUT_S = 60.0


def _user(config: dict[str, str]) -> str:
    return f"User:{config['sasl.username']}"


def test_wrong_password_is_refused_at_once_without_the_password(principal, secured_topic) -> None:
    topic = secured_topic("orders")
    config = principal(resolve("watcher", job="j", inputs=[topic]))
    wrong = {**config, "sasl.password": "not-the-password-4711"}
    admin = KafkaAdmin(wrong, timeout_s=LONG_TIMEOUT_S)
    with admin, pytest.raises(KafkaAuthenticationError) as caught:
        admin.partition_counts([topic])
    message = str(caught.value)
    assert "refused authentication" in message and "SCRAM-SHA-512" in message
    assert "not-the-password-4711" not in message
    store = open_store("kafka", "j-wrong", wrong)
    with pytest.raises(KafkaAuthenticationError):
        store.latest_job_model()
    store.close()


def test_expand_without_alter_acl_names_principal_operation_topic_and_changes_nothing(
    principal, secured_topic, admin_config
) -> None:
    topic = secured_topic("orders", partitions=2)
    config = principal(resolve("plan", job="j", inputs=[topic]))  # plan has no ALTER
    with KafkaAdmin(config, timeout_s=LONG_TIMEOUT_S) as admin:
        assert admin.partition_counts([topic]) == {topic: 2}
        with pytest.raises(KafkaAuthorizationError) as caught:
            admin.create_partitions(topic, 4)
    message = str(caught.value)
    assert _user(config) in message and "ALTER on TOPIC" in message and repr(topic) in message
    assert "TOPIC_AUTHORIZATION_FAILED" in message and "--operation Alter" in message
    with KafkaAdmin(admin_config) as admin:
        assert admin.partition_counts([topic]) == {topic: 2}


def test_barrier_without_group_acl_names_the_group(principal, secured_topic) -> None:
    topic = secured_topic("orders")
    job = f"job-{topic}"
    rules = [r for r in resolve("barrier", job=job, inputs=[topic]) if r[0] != "GROUP"]
    config = principal(rules)
    with KafkaAdmin(config, timeout_s=LONG_TIMEOUT_S) as admin:
        assert admin.high_watermarks({topic: [0, 1]}) == {topic: {0: 0, 1: 0}}
        with pytest.raises(KafkaAuthorizationError) as caught:
            admin.group_offsets(job, {topic: [0, 1]})
    message = str(caught.value)
    assert _user(config) in message and f"DESCRIBE on GROUP {job!r}" in message
    assert "GROUP_AUTHORIZATION_FAILED" in message and f"--group {job}" in message


def test_describe_denied_topic_is_a_refusal_not_unavailable(principal, secured_topic) -> None:
    visible, hidden = secured_topic("orders"), secured_topic("hidden")
    config = principal(resolve("watcher", job="j", inputs=[visible]))
    admin = KafkaAdmin(config, timeout_s=LONG_TIMEOUT_S)
    with admin, pytest.raises(KafkaAuthorizationError) as caught:
        admin.partition_counts([visible, hidden])
    assert f"DESCRIBE on TOPIC {hidden!r}" in str(caught.value)
    assert "may also not exist" in str(caught.value)


@pytest.mark.parametrize("writes_elsewhere", [False, True], ids=["no-write", "write-elsewhere"])
def test_store_without_write_acl_on_the_coordinator_topic(
    principal, secured_topic, admin_config, writes_elsewhere
) -> None:
    """No WRITE at all: the idempotent producer gets CLUSTER_AUTHORIZATION_FAILED; WRITE on
    another topic: the produce gets TOPIC_AUTHORIZATION_FAILED. Both name the topic."""
    job = f"job-{secured_topic('x', partitions=1)}"
    topic = coordinator_topic(job)
    with KafkaAdmin(admin_config) as admin:
        admin.ensure_topic(topic, 1, {"cleanup.policy": "compact"}, replication_factor=1)
    output = secured_topic("out", partitions=1)
    rules = [("TOPIC", topic, "LITERAL", "READ")]
    if writes_elsewhere:
        rules.append(("TOPIC", output, "LITERAL", "WRITE"))
    config = principal(rules)
    store = KafkaCoordinatorStore(config, job, timeout_s=LONG_TIMEOUT_S)
    try:
        assert store.latest_job_model() is None  # reading is allowed
        with pytest.raises(KafkaAuthorizationError) as caught:
            store.write_job_model(JobModel.initial(job, {"orders": 2}))
    finally:
        store.close()
    message = str(caught.value)
    assert _user(config) in message and f"WRITE on TOPIC {topic!r}" in message
    code = "TOPIC_AUTHORIZATION_FAILED" if writes_elsewhere else "CLUSTER_AUTHORIZATION_FAILED"
    assert code in message
    assert isinstance(caught.value, ExpansionError)


def test_a_missing_acl_fails_the_airflow_task_without_retry(principal, secured_topic) -> None:
    """The Airflow surface's outcome mapping turns the broker's refusal into
    AirflowFailException (a task that fails at once, never retried)."""
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_samza_expand.airflow._shell import protocol_outcomes

    topic = secured_topic("orders", partitions=2)
    config = principal(resolve("watcher", job="j", inputs=[topic]))
    admin = KafkaAdmin(config, timeout_s=LONG_TIMEOUT_S)
    refused = pytest.raises(AirflowFailException, match="KafkaAuthorizationError: .*ALTER")
    with admin, refused, protocol_outcomes():
        admin.create_partitions(topic, 4)
