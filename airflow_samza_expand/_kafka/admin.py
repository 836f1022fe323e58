"""Blocking Kafka admin adapter: partition counts, partition growth, watermarks, group offsets.

Refusals (no retry helps) raise `ExpansionError` subclasses; an unreachable or slow broker raises
`KafkaUnavailableError`, which is deliberately *not* an `ExpansionError`, so callers retry it.
Triggers call these methods through `asyncio.to_thread`.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewPartitions, NewTopic

from airflow_samza_expand._kafka.auth import AuthWatch, watched
from airflow_samza_expand._kafka.authz import raise_if_denied
from airflow_samza_expand._kafka.clients import AdminClient
from airflow_samza_expand._kafka.config import bootstrap_of
from airflow_samza_expand._kafka.errors import (  # noqa: F401 - re-exported: the layer's names
    CONSUMER_ONLY_SETTINGS,
    LEADER_ELECTION_CODES,
    UNKNOWN_TOPIC_CODES,
    KafkaUnavailableError,
    is_unavailable,
    kafka_error_of,
    unavailable,
    without_consumer_settings,
)
from airflow_samza_expand._kafka.group_offsets import GroupOffsetReader
from airflow_samza_expand._kafka.leader_offsets import LeaderOffsets
from airflow_samza_expand.core.errors import (
    ExpansionError,
    InvalidGrowthError,
    KafkaAuthenticationError,
    UnknownTopicError,
)

log = logging.getLogger(__name__)

__all__ = ["KafkaAdmin", "KafkaAuthenticationError", "KafkaUnavailableError"]


class KafkaAdmin(LeaderOffsets):
    """Thin, blocking wrapper over confluent-kafka's AdminClient with typed errors; its
    partitions' offsets come from their leaders (`_kafka.leader_offsets`)."""

    def __init__(self, config: Mapping[str, str], *, timeout_s: float = 30.0) -> None:
        self.config = dict(config)
        self.timeout_s = float(timeout_s)
        self._auth = AuthWatch()  # names SASL/SSL failures at once (kafka.auth)
        self._client = AdminClient(self._auth.client_settings(without_consumer_settings(config)))
        self._groups = GroupOffsetReader(self.config, self._auth, self.timeout_s)

    def __repr__(self) -> str:  # never shows secrets
        return f"KafkaAdmin(bootstrap={bootstrap_of(self.config)!r}, timeout_s={self.timeout_s})"

    @property
    def bootstrap(self) -> str:
        return bootstrap_of(self.config)

    # -- helpers ---------------------------------------------------------------------------

    def _result(
        self,
        future: concurrent.futures.Future,
        what: str,
        *,
        passthrough: Callable[[KafkaError | None], bool] | None = None,
    ) -> Any:
        """Wait for an admin future; translate timeouts into KafkaUnavailableError.

        Errors ``passthrough`` accepts are re-raised as they are, for the caller.
        """
        try:
            return watched(
                lambda step: future.result(timeout=step),
                self._client.poll,
                self._auth,
                self.timeout_s + 5.0,
                what,
                self.config,
            )
        except concurrent.futures.TimeoutError:
            raise unavailable(what, self.config, f"no answer within {self.timeout_s:g} s") from None
        except KafkaException as exc:
            error = kafka_error_of(exc)
            if is_unavailable(error) and not (passthrough is not None and passthrough(error)):
                raise unavailable(what, self.config, error.str() if error else exc) from None
            raise

    def _metadata(self, what: str, topic: str | None = None) -> Any:
        try:
            return watched(
                lambda step: self._client.list_topics(topic=topic, timeout=step),
                self._client.poll,
                self._auth,
                self.timeout_s,
                what,
                self.config,
            )
        except KafkaException as exc:
            error = kafka_error_of(exc)
            if error is None or is_unavailable(error):
                detail = error.str() if error else exc
                raise unavailable(what, self.config, detail) from None
            raise

    def _raise_if_denied(
        self,
        error: KafkaError | None,
        operation: str,
        name: str,
        what: str,
        resource: str = "TOPIC",
    ) -> None:
        """KafkaAuthorizationError (kafka.authz) if `error` is a missing ACL."""
        raise_if_denied(
            error, operation=operation, resource=resource, name=name, what=what, config=self.config
        )

    # -- topics ----------------------------------------------------------------------------

    def topic_names(self) -> list[str]:
        """Names of the existing topics (sorted)."""
        metadata = self._metadata("listing topics")
        return sorted(
            name for name, meta in metadata.topics.items() if meta.error is None or not meta.error
        )

    def partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        """Current partition count of each topic; UnknownTopicError if one does not exist."""
        wanted = list(dict.fromkeys(topics))
        metadata = self._metadata(f"reading metadata of {', '.join(wanted) or 'no topics'}")
        counts: dict[str, int] = {}
        for topic in wanted:
            meta = metadata.topics.get(topic)
            error = getattr(meta, "error", None) if meta is not None else None
            if meta is None or (error is not None and error.code() in UNKNOWN_TOPIC_CODES):
                self._raise_if_hidden(topic)
                raise self._unknown_topic(topic, metadata)
            self._raise_if_denied(error, "DESCRIBE", topic, f"reading metadata of {topic!r}")
            if error is not None and error.code() != KafkaError.NO_ERROR:
                raise unavailable(f"reading metadata of topic {topic!r}", self.config, error.str())
            counts[topic] = len(meta.partitions)
        return counts

    def _raise_if_hidden(self, topic: str) -> None:
        """A listing of all topics leaves out those the principal may not describe: ask for
        `topic` by name, and refuse naming the ACL if the broker denies it (a secured broker
        denies an unknown topic too, so the message cannot say which it is)."""
        what = f"reading metadata of {topic!r} (it may also not exist)"
        meta = self._metadata(what, topic=topic).topics.get(topic)
        self._raise_if_denied(getattr(meta, "error", None), "DESCRIBE", topic, what)

    def _unknown_topic(self, topic: str, metadata: Any) -> UnknownTopicError:
        existing = sorted(n for n in metadata.topics if not n.startswith("__"))
        shown = ", ".join(existing[:20]) or "(none)"
        if len(existing) > 20:
            shown += f" ... and {len(existing) - 20} more"
        return UnknownTopicError(
            f"topic {topic!r} does not exist on {self.bootstrap}; existing topics: {shown} - "
            "check the topic name (or create the topic first)"
        )

    def create_partitions(self, topic: str, total: int, *, validate_only: bool = False) -> None:
        """Grow `topic` to `total` partitions (the broker validates only, if asked).

        INVALID_PARTITIONS (shrink, same count) -> InvalidGrowthError; unknown topic ->
        UnknownTopicError; timeout -> KafkaUnavailableError (the growth may still have been
        applied: re-read the count before retrying); other broker refusals -> ExpansionError.
        An applied growth returns once the broker's metadata shows it (`_wait_shown`).
        """
        if isinstance(total, bool) or not isinstance(total, int) or total <= 0:
            raise InvalidGrowthError(
                f"cannot grow topic {topic!r} to {total!r} partitions - pass a positive integer"
            )
        what = f"growing topic {topic!r} to {total} partitions"
        futures = self._client.create_partitions(
            [NewPartitions(topic, total)],
            validate_only=validate_only,
            request_timeout=self.timeout_s,
            operation_timeout=self.timeout_s,
        )
        try:
            self._result(futures[topic], what)
        except KafkaException as exc:
            error = kafka_error_of(exc)
            code = error.code() if error else None
            reason = f"{error.name()}: {error.str()}" if error else str(exc)
            if code == KafkaError.INVALID_PARTITIONS:
                raise InvalidGrowthError(
                    f"Kafka refused {what}: {reason} - partitions can only be added; "
                    "pass a count larger than the current one"
                ) from None
            if code in UNKNOWN_TOPIC_CODES:
                raise self._unknown_topic(topic, self._metadata("listing topics")) from None
            self._raise_if_denied(error, "ALTER", topic, what)
            raise ExpansionError(f"Kafka refused {what}: {reason}") from None
        if not validate_only:
            self._wait_shown(topic, total, what)
        log.info("%s %s", "validated" if validate_only else "applied", what)

    def _wait_shown(self, topic: str, total: int, what: str) -> None:
        """Kafka creates topics and partitions in its controller, and a broker learns of them
        a moment later (the Admin API documents the lag): until then its Metadata answers the
        old count, or no topic, and reads of what is new are refused. Ask until it shows at
        least ``total`` partitions; past the timeout the change stands, and the failure is a
        retryable one."""
        deadline = time.monotonic() + self.timeout_s
        pause = 0.05
        while (count := self._shown_count(topic)) < total:
            if time.monotonic() >= deadline:
                raise unavailable(
                    what, self.config, f"applied, but the broker's metadata still shows {count} "
                    f"of {total} partitions after {self.timeout_s:g} s"
                )  # fmt: skip
            log.debug("%s: the broker's metadata shows %d of %d partitions yet", what, count, total)
            time.sleep(pause)
            pause = min(pause * 2, 1.0)

    def _shown_count(self, topic: str) -> int:
        """Partitions of `topic` the broker's metadata shows (0: it does not show the topic)."""
        try:
            return self.partition_counts([topic])[topic]
        except UnknownTopicError:
            return 0

    def ensure_topic(
        self,
        topic: str,
        partitions: int = 1,
        config: Mapping[str, str] | None = None,
        *,
        replication_factor: int = -1,
    ) -> bool:
        """Create `topic` if missing; True if this call created it (an existing topic is kept).
        Returns once the broker's metadata shows the topic (`_wait_shown`)."""
        new_topic = NewTopic(
            topic,
            num_partitions=partitions,
            replication_factor=replication_factor,
            config=dict(config or {}),
        )
        futures = self._client.create_topics(
            [new_topic], request_timeout=self.timeout_s, operation_timeout=self.timeout_s
        )
        what = f"creating topic {topic!r}"
        try:
            self._result(futures[topic], what)
        except KafkaException as exc:
            error = kafka_error_of(exc)
            if error is not None and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                self._wait_shown(topic, 1, what)  # perhaps created by another a moment ago
                return False
            reason = f"{error.name()}: {error.str()}" if error else str(exc)
            self._raise_if_denied(error, "CREATE", topic, what)
            raise ExpansionError(f"Kafka refused to create topic {topic!r}: {reason}") from None
        self._wait_shown(topic, partitions, what)
        log.info("created topic %s with %d partition(s)", topic, partitions)
        return True

    def group_offsets(
        self, group: str, topic_partitions: Mapping[str, Iterable[int]]
    ) -> dict[str, dict[int, int | None]]:
        """Committed offsets of `group` (None = nothing committed): one OffsetFetch request
        (kafka.group_offsets: read through a consumer of the group, never the admin call)."""
        return self._groups.read(group, topic_partitions)

    def commit_group_offsets(self, group: str, offsets: Mapping[str, Mapping[int, int]]) -> None:
        """Commit ``offsets`` for ``group`` from outside it (the group must have no members)."""
        self._groups.commit(group, offsets)

    def consumer_group_ids(self) -> list[str]:
        """Ids of the consumer groups the brokers know (ListGroups), sorted."""
        future = self._client.list_consumer_groups(request_timeout=self.timeout_s)
        answer = self._result(future, "listing consumer groups")
        for error in answer.errors:
            log.warning("listing consumer groups: a broker answered %s", error)
        return sorted({g.group_id for g in answer.valid})

    def group_members(self, group: str) -> list[str]:
        """The live members of consumer group `group` (DescribeGroups), each as
        "<client id>@<host>", sorted; [] for an empty or unknown group. (The runtime's processors
        commit with ``assign()`` and are no members: the coordinator store names those.)"""
        futures = self._client.describe_consumer_groups([group], request_timeout=self.timeout_s)
        try:
            description = self._result(futures[group], f"describing consumer group {group!r}")
        except KafkaException as exc:
            error = kafka_error_of(exc)
            self._raise_if_denied(error, "DESCRIBE", group, "describing a group", "GROUP")
            raise
        return sorted(f"{m.client_id}@{m.host.lstrip('/')}" for m in description.members or [])

    def committed_offsets(
        self, group: str, topic: str, partitions: Iterable[int]
    ) -> dict[int, int | None]:
        """Committed offsets of `group` on the given partitions of `topic` (None = none)."""
        return self.group_offsets(group, {topic: list(partitions)})[topic]

    def close(self) -> None:
        """Close the group-offset readers and drop the AdminClient (it has no close())."""
        self._groups.close()
        self._client = None  # type: ignore[assignment]

    def __enter__(self) -> KafkaAdmin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
