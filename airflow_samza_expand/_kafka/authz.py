"""Name a missing ACL as a refusal, at once, instead of a timeout or a generic broker error.

A broker with an authorizer answers an operation the principal may not do with
TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED or CLUSTER_AUTHORIZATION_FAILED. These
are not transient: the same call with the same credentials fails until an operator grants the
ACL. `denied(...)` turns such an error into `KafkaAuthorizationError` (an `ExpansionError`:
`AirflowFailException` in Airflow, never retried) whose message names the principal, the
operation, the resource and the ACL to grant; other errors give None (the caller goes on).

librdkafka reports a group the principal may not use only as an event on the consumer's queue
(FindCoordinator failed), while `Consumer.committed` waits for a coordinator until its timeout:
`raise_if_group_denied` drains that queue between short waits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError

from airflow_samza_expand._kafka.config import bootstrap_of
from airflow_samza_expand.core.errors import KafkaAuthorizationError

AUTHZ_CODES = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    }
)


def principal_of(config: Mapping[str, Any]) -> str:
    """`User:<sasl.username>` (never a secret), or what identifies the connection otherwise."""
    user = config.get("sasl.username")
    if user:
        return f"User:{user}"
    protocol = config.get("security.protocol", "PLAINTEXT")
    return f"the principal of the connection (security.protocol={protocol})"


def is_denied(error: KafkaError | None) -> bool:
    return error is not None and error.code() in AUTHZ_CODES


def denied(
    error: KafkaError | None,
    *,
    operation: str,
    resource: str,
    name: str,
    what: str,
    config: Mapping[str, Any],
) -> KafkaAuthorizationError | None:
    """The refusal for an authorization error (`resource` TOPIC/GROUP, `name` its name,
    `operation` the ACL operation the call needs), or None for any other error."""
    if not is_denied(error):
        return None
    assert error is not None
    principal = principal_of(config)
    code = error.name()
    note = ""
    if error.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED and operation == "WRITE":
        # KIP-679: an idempotent producer needs WRITE on some topic (or IDEMPOTENT_WRITE)
        note = " (the idempotent producer found no topic it may write)"
    flag = "--group" if resource == "GROUP" else "--topic"
    return KafkaAuthorizationError(
        f"Kafka at {bootstrap_of(config)} denied {principal} {operation} on {resource} "
        f"{name!r} while {what}: {code}{note} - grant it, e.g. kafka-acls.sh --add "
        f"--allow-principal {principal if principal.startswith('User:') else 'User:<name>'} "
        f"--operation {operation.title()} "
        f"{flag} {name} (the ACL table of docs/deployments.md lists every ACL "
        "each actor needs)"
    )


def raise_if_denied(
    error: KafkaError | None,
    *,
    operation: str,
    resource: str,
    name: str,
    what: str,
    config: Mapping[str, Any],
) -> None:
    refusal = denied(
        error, operation=operation, resource=resource, name=name, what=what, config=config
    )
    if refusal is not None:
        raise refusal


def raise_if_group_denied(consumer: Any, group: str, what: str, config: Mapping[str, Any]) -> None:
    """Drain an *unassigned* consumer's queue (it holds only error events); raise the refusal
    if the broker denied the group."""
    while True:
        event = consumer.poll(0)
        if event is None:
            return
        raise_if_denied(
            event.error(),
            operation="DESCRIBE",
            resource="GROUP",
            name=group,
            what=what,
            config=config,
        )


__all__ = [
    "AUTHZ_CODES",
    "denied",
    "is_denied",
    "principal_of",
    "raise_if_denied",
    "raise_if_group_denied",
]
