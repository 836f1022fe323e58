"""The Kafka layer's error vocabulary: which librdkafka answers are transient, and how an
unreachable broker is named (`KafkaUnavailableError`, deliberately not an `ExpansionError`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from airflow_samza_expand._kafka.config import bootstrap_of

# Consumer-only settings that an AdminClient/Producer would warn about.
CONSUMER_ONLY_SETTINGS = frozenset(
    {
        "group.id",
        "group.instance.id",
        "enable.auto.commit",
        "auto.commit.interval.ms",
        "auto.offset.reset",
        "enable.partition.eof",
        "isolation.level",
        "session.timeout.ms",
        "max.poll.interval.ms",
        "fetch.min.bytes",
        "fetch.max.bytes",
        "fetch.wait.max.ms",
        "max.partition.fetch.bytes",
        "partition.assignment.strategy",
    }
)

# Error codes that mean "the broker did not answer in time / cannot be reached".
UNAVAILABLE_CODES = frozenset(
    {
        KafkaError._TIMED_OUT,
        KafkaError._TIMED_OUT_QUEUE,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._MSG_TIMED_OUT,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NOT_CONTROLLER,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.NOT_COORDINATOR,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
    }
)


class KafkaUnavailableError(Exception):
    """The broker could not be reached or did not answer in time; retrying may help.

    A broker that answers but refuses the credentials raises `KafkaAuthenticationError` (an
    `ExpansionError`: not retried) instead."""


def without_consumer_settings(config: Mapping[str, str]) -> dict[str, str]:
    """`config` minus consumer-only settings (for AdminClient and Producer)."""
    return {k: v for k, v in config.items() if k not in CONSUMER_ONLY_SETTINGS}


def kafka_error_of(exc: BaseException | None) -> KafkaError | None:
    """The KafkaError inside a KafkaException, if any."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def ignored_by_assign_only(error: KafkaError | None) -> bool:
    """True for the consumer error an ``assign()``-only reader reads past: librdkafka looks up
    the coordinator of its ``group.id`` (FindCoordinator) although it never joins or commits,
    and reports a missing group ACL as GROUP_AUTHORIZATION_FAILED at whichever poll the answer
    arrives. Such readers (coordinator store, partitioner sampler, stale scan) hold no group
    ACL by design (`_kafka.acls`)."""
    return error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def is_unavailable(error: KafkaError | None) -> bool:
    """True for timeouts, transport failures and other retriable broker states."""
    if error is None:
        return False
    return error.code() in UNAVAILABLE_CODES or bool(error.retriable())


def unavailable(what: str, config: Mapping[str, Any], detail: object) -> KafkaUnavailableError:
    """A KafkaUnavailableError naming the operation and the bootstrap servers."""
    return KafkaUnavailableError(
        f"Kafka at {bootstrap_of(config)} did not complete {what}: {detail} - "
        "check that the brokers are reachable and retry"
    )


UNKNOWN_TOPIC_CODES = frozenset(
    {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION}
)
# a request to a broker that just died: no answer in time, the connection lost, or its handle
# decommissioned by the client once the broker left the metadata - ask again (the new leader)
BROKER_GONE_CODES = frozenset(
    {KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._DESTROY_BROKER}
)
# the client knows no leader for a partition (librdkafka's ListOffsets: "Failed to query
# partition leaders: No leaders found"), as while a rolling restart moves every leadership - ask
# again, through a new client (the old one may keep its leaderless metadata)
NO_LEADER_CODES = frozenset({KafkaError._NOENT})
# a partition created or moved a moment ago answers so until its leader is known (KIP-320 epochs)
LEADER_ELECTION_CODES = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.OFFSET_NOT_AVAILABLE,
    }
)
# what Kafka's protocol marks retriable (its clients' RetriableException: the broker may answer
# otherwise a moment later) - an error built from an answer's code carries no retriable() flag
KAFKA_RETRIABLE_CODES = frozenset(
    {
        KafkaError.INVALID_MSG,  # CORRUPT_MESSAGE
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,  # NOT_LEADER_OR_FOLLOWER
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.REPLICA_NOT_AVAILABLE,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        KafkaError.NOT_CONTROLLER,
        KafkaError.KAFKA_STORAGE_ERROR,
        KafkaError.CONCURRENT_TRANSACTIONS,
        KafkaError.FETCH_SESSION_ID_NOT_FOUND,
        KafkaError.INVALID_FETCH_SESSION_EPOCH,
        KafkaError.LISTENER_NOT_FOUND,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError.PREFERRED_LEADER_NOT_AVAILABLE,
        KafkaError.ELIGIBLE_LEADERS_NOT_AVAILABLE,
        KafkaError.UNSTABLE_OFFSET_COMMIT,
        KafkaError.THROTTLING_QUOTA_EXCEEDED,
        KafkaError.UNKNOWN_TOPIC_ID,
        KafkaError.INCONSISTENT_TOPIC_ID,
    }
)


RETRIABLE_CODES = (
    KAFKA_RETRIABLE_CODES | LEADER_ELECTION_CODES | BROKER_GONE_CODES | NO_LEADER_CODES
    | UNAVAILABLE_CODES
)  # fmt: skip


def is_retriable(error: KafkaError | None) -> bool:
    """True for an error Kafka marks retriable: librdkafka's flag, a code Kafka's protocol
    lists as retriable, or a request that met no live broker or no leader (`RETRIABLE_CODES`)."""
    return error is not None and (bool(error.retriable()) or error.code() in RETRIABLE_CODES)
