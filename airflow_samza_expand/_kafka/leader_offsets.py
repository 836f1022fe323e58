"""The offsets of partitions, each from its partition leader, while leaders move: the
watermark reads of `KafkaAdmin` (a mixin over its client, its result and metadata helpers).

Which broker's answer counts: the partition leader's, asked through ListOffsets. A cluster's
brokers learn a new leader at their own moment, and a restarted broker fences the leader epoch
a client cached; an answer that is an error Kafka marks retriable (a leader being elected or
fenced, no leader), a partition this client does not know yet, no offset, or no answer within a
round is asked again until the admin's timeout - never taken as an offset."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from airflow_samza_expand._kafka.clients import AdminClient
from airflow_samza_expand._kafka.errors import (
    BROKER_GONE_CODES,
    LEADER_ELECTION_CODES,
    NO_LEADER_CODES,
    UNKNOWN_TOPIC_CODES,
    is_retriable,
    kafka_error_of,
    unavailable,
    without_consumer_settings,
)
from airflow_samza_expand.core.errors import ExpansionError

log = logging.getLogger("airflow_samza_expand._kafka.admin")
# offsets are asked in rounds of at most ROUND_S; a partition whose round times out (a dead
# leader), loses its connection or its broker handle, finds no leader, or is answered with
# another error Kafka marks retriable, is asked again through a new client
ROUND_S = 5.0


# the answers of a partition whose leader moves: asked again, never taken as offsets
LEADER_MOVING_CODES = (
    LEADER_ELECTION_CODES | UNKNOWN_TOPIC_CODES | BROKER_GONE_CODES | NO_LEADER_CODES
)


def consumer_watermarks(
    consumer_of: Callable[[bool], Any],
    tp: TopicPartition,
    deadline: float,
    on_error: Callable[[str], Exception],
) -> tuple[int, int]:
    """(low, high) of ``tp`` from its leader, through ``consumer_of(False)``. While the leader
    moves (a broker died) the answer is an error of `LEADER_MOVING_CODES` or a negative offset:
    asked again, in rounds of at most `ROUND_S`, until ``deadline`` (monotonic), never taken
    as the end of the log - each time through ``consumer_of(True)``, a new consumer: a
    long-lived librdkafka client can keep answering "unknown partition" for a killed leader's
    partition long after the new leader serves (over 60 s seen). Another error, or the
    deadline: ``raise on_error(detail)``."""
    pause = 0.05
    renew = False
    while True:
        try:
            round_s = max(0.5, min(ROUND_S, deadline - time.monotonic()))
            consumer = consumer_of(renew)
            low, high = consumer.get_watermark_offsets(tp, timeout=round_s, cached=False)
            detail = f"no offset (low {low}, high {high})"
            if low >= 0 and high >= 0:
                return low, high
        except KafkaException as exc:
            error = kafka_error_of(exc)
            if error is None or error.code() not in LEADER_MOVING_CODES:
                raise on_error(error.str() if error else str(exc)) from None
            detail = error.str()
        if time.monotonic() >= deadline:
            raise on_error(detail)
        log.info("offsets of %s[%d]: the partition's leader is moving (%s); asking again "
                 "through a new consumer", tp.topic, tp.partition, detail)  # fmt: skip
        renew = True
        time.sleep(pause)
        pause = min(pause * 2, 1.0)


class LeaderOffsets:
    """`KafkaAdmin`'s offset reads; needs its ``_client``, ``_auth``, ``config``,
    ``timeout_s``, ``_result``, ``_metadata``, ``_unknown_topic`` and ``_raise_if_denied``."""

    _client: Any
    _auth: Any
    config: dict[str, str]
    timeout_s: float

    def _list_offsets(
        self, topic_partitions: Mapping[str, Iterable[int]], spec: OffsetSpec, what: str
    ) -> dict[str, dict[int, int]]:
        """Offsets of many partitions, each from its partition leader. A partition answered
        with an error Kafka marks retriable (`is_retriable`: a leader being elected or fenced,
        a broker gone, no leader known), one this client does not know yet (added since its
        metadata was cached), or no offset (-1001 once its leader died, or no answer in a
        round) is asked again through a new admin client (`_renew_client`) until `timeout_s`:
        a barrier must never snapshot an unknown high watermark."""
        pending = {
            TopicPartition(topic, int(p)): spec
            for topic, partitions in topic_partitions.items()
            for p in partitions
        }
        result: dict[str, dict[int, int]] = {t: {} for t in topic_partitions}
        deadline = time.monotonic() + self.timeout_s
        pause = 0.05
        while pending:
            # one round is short: a request sent to a dead leader must not eat the whole timeout
            round_s = max(0.5, min(self.timeout_s, ROUND_S, deadline - time.monotonic()))
            futures = self._client.list_offsets(pending, request_timeout=round_s)
            again: dict[TopicPartition, OffsetSpec] = {}
            unknown: list[str] = []
            answers: set[str] = set()
            seen: dict[str, Any] = {}  # the round's metadata, read once
            for tp, future in futures.items():
                try:
                    info = self._result(future, what, passthrough=is_retriable)
                except KafkaException as exc:
                    answers.add(self._retry_detail(tp, exc, what, seen))
                    unknown.append(f"{tp.topic}-{tp.partition}")
                    again[tp] = spec
                    continue
                if int(info.offset) < 0:
                    unknown.append(f"{tp.topic}-{tp.partition}")
                    again[tp] = spec
                    continue
                result[tp.topic][tp.partition] = int(info.offset)
            if unknown:
                why = "; ".join(sorted(answers)) or "its leader is moving"
                if time.monotonic() >= deadline:
                    raise unavailable(
                        what, self.config, f"no offset for {', '.join(unknown)} ({why})"
                    )
                log.info("%s: no offset yet for %s (%s); asking again through a new admin client",
                         what, ", ".join(unknown), why)  # fmt: skip
                self._renew_client()
                time.sleep(pause)
                pause = min(pause * 2, 1.0)
            pending = again
        return result

    def _renew_client(self) -> None:
        """Replace the admin client. After a partition leader dies, librdkafka's admin client
        keeps answering ListOffsets with no offset (-1001) for that partition, also after a
        metadata refresh and long after the new leader serves (seen for 90 s on a three-node
        cluster), while a new client gets the new leader's answer at once."""
        self._client = AdminClient(
            self._auth.client_settings(without_consumer_settings(self.config))
        )

    def _retry_detail(
        self, tp: TopicPartition, exc: KafkaException, what: str, seen: dict[str, Any]
    ) -> str:
        """Why ``tp`` is worth asking again: its error, if Kafka marks it retriable or the
        partition exists but this client does not know it yet; raise otherwise (a refusal
        naming a missing topic, partition or ACL, or the error as it is)."""
        error = kafka_error_of(exc)
        if error is not None and error.code() in UNKNOWN_TOPIC_CODES:
            if "metadata" not in seen:  # also refreshes the client's cache
                seen["metadata"] = self._metadata("listing topics")
            metadata = seen["metadata"]
            topic = metadata.topics.get(tp.topic)
            listed = topic.error if topic is not None else None  # retriable: asked again
            if topic is None or (listed is not None and not _still_loading(listed)):
                raise self._unknown_topic(tp.topic, metadata)
            if listed is None and tp.partition not in topic.partitions:
                raise ExpansionError(
                    f"topic {tp.topic!r} has no partition {tp.partition} (it has "
                    f"{len(topic.partitions)}) - ask for partitions 0..{len(topic.partitions) - 1}"
                )
        elif not is_retriable(error):
            self._raise_if_denied(error, "DESCRIBE", tp.topic, what)
            raise exc
        return error.str() if error is not None else str(exc)

    def high_watermarks(
        self, topic_partitions: Mapping[str, Iterable[int]]
    ) -> dict[str, dict[int, int]]:
        """High watermark (next offset to be written) of many partitions in one admin call."""
        return self._list_offsets(topic_partitions, OffsetSpec.latest(), "reading end offsets")

    def low_watermarks(
        self, topic_partitions: Mapping[str, Iterable[int]]
    ) -> dict[str, dict[int, int]]:
        """Log start offset of many partitions in one admin call."""
        return self._list_offsets(topic_partitions, OffsetSpec.earliest(), "reading start offsets")

    def watermarks(self, topic: str, partitions: Iterable[int]) -> dict[int, tuple[int, int]]:
        """(low, high) watermarks of the given partitions of `topic`."""
        wanted = {topic: sorted(set(partitions))}
        lows = self.low_watermarks(wanted)[topic]
        highs = self.high_watermarks(wanted)[topic]
        return {p: (lows[p], highs[p]) for p in wanted[topic]}


def _still_loading(error: Any) -> bool:
    """A topic listed with an error Kafka marks retriable other than "unknown topic" (its
    leaders not known yet, as after a restart): the topic exists."""
    return error.code() not in UNKNOWN_TOPIC_CODES and is_retriable(error)
