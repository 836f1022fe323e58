"""Reading and appending the coordinator topic with confluent-kafka (no record semantics here)."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from airflow_samza_expand._kafka.admin import (
    KafkaAdmin,
    is_unavailable,
    kafka_error_of,
    unavailable,
    without_consumer_settings,
)
from airflow_samza_expand._kafka.auth import AuthWatch, watched
from airflow_samza_expand._kafka.authz import raise_if_denied
from airflow_samza_expand._kafka.clients import Consumer, Producer
from airflow_samza_expand._kafka.errors import (
    LEADER_ELECTION_CODES,
    UNKNOWN_TOPIC_CODES,
    ignored_by_assign_only,
)
from airflow_samza_expand._kafka.leader_offsets import consumer_watermarks
from airflow_samza_expand.core.errors import ExpansionError

log = logging.getLogger(__name__)

COORDINATOR_TOPIC_CONFIG = {"cleanup.policy": "compact"}
# transient while the partition's leader moves (a broker died or stopped): asked again
LEADER_MOVING_CODES = LEADER_ELECTION_CODES | UNKNOWN_TOPIC_CODES
Apply = Callable[[int, bytes | None, bytes | None], None]


class TopicIO:
    """One single-partition topic: lazily created clients, read-to-end, acknowledged appends."""

    def __init__(
        self, config: Mapping[str, str], topic: str, timeout_s: float, replication_factor: int
    ) -> None:
        self.config = dict(config)
        self.topic = topic
        self.timeout_s = timeout_s
        self.replication_factor = replication_factor
        self.position = 0  # next offset to read
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._exists = False
        self._auth = AuthWatch()  # names SASL/SSL failures at once (kafka.auth)

    def consumer(self, renew: bool = False) -> Consumer:
        """The topic's reader consumer; ``renew``: close it and make a new one."""
        if renew and self._consumer is not None:
            with contextlib.suppress(Exception):  # a client that cannot close is dropped
                self._consumer.close()
            self._consumer = None
        if self._consumer is None:
            settings = {k: v for k, v in self.config.items() if k != "group.id"}
            settings.update(
                {
                    # librdkafka needs a group id; the reader only assign()s, never commits
                    "group.id": f"{self.topic}.reader",
                    "enable.auto.commit": "false",
                    "enable.auto.offset.store": "false",
                    "auto.offset.reset": "earliest",
                    "enable.partition.eof": "true",
                    "fetch.wait.max.ms": "10",
                    "fetch.max.bytes": "52428800",
                    "max.partition.fetch.bytes": "52428800",
                    "queued.max.messages.kbytes": "262144",
                }
            )
            self._consumer = Consumer(self._auth.client_settings(settings))
        return self._consumer

    def producer(self) -> Producer:
        if self._producer is None:
            settings = without_consumer_settings(self.config)
            settings.update(
                {
                    "acks": "all",
                    "enable.idempotence": "true",
                    "linger.ms": "0",
                    "message.timeout.ms": str(int(self.timeout_s * 1000)),
                }
            )
            self._producer = Producer(self._auth.client_settings(settings))
        return self._producer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        if self._producer is not None:
            self._producer.flush(self.timeout_s)
            self._producer = None

    def _raise_if_denied(self, error: KafkaError | None, operation: str, what: str) -> None:
        """KafkaAuthorizationError (kafka.authz) if `error` is a missing ACL on the topic."""
        raise_if_denied(
            error, operation=operation, resource="TOPIC", name=self.topic, what=what,
            config=self.config,
        )  # fmt: skip

    def topic_exists(self) -> bool:
        """True if the topic exists (and has one partition); cached once it exists."""
        if self._exists:
            return True
        what = f"reading metadata of coordinator topic {self.topic!r}"
        consumer = self.consumer()
        try:
            metadata = watched(
                lambda step: consumer.list_topics(self.topic, timeout=step),
                consumer.poll,
                self._auth,
                self.timeout_s,
                what,
                self.config,
            )
        except KafkaException as exc:
            error = kafka_error_of(exc)
            raise unavailable(what, self.config, error.str() if error else exc) from None
        meta = metadata.topics.get(self.topic)
        if meta is None or (meta.error is not None and meta.error.code() != KafkaError.NO_ERROR):
            code = meta.error.code() if meta is not None and meta.error is not None else None
            if code in (None, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC):
                return False
            self._raise_if_denied(meta.error, "DESCRIBE", what)
            raise unavailable(what, self.config, meta.error.str())
        if len(meta.partitions) != 1:
            raise ExpansionError(
                f"coordinator topic {self.topic!r} has {len(meta.partitions)} partitions; it "
                "must have exactly 1 (the log order is the store's order) - point the job at a "
                "single-partition compacted topic"
            )
        self._exists = True
        return True

    def replication(self) -> tuple[int, int] | None:
        """(replicas of partition 0, brokers the cluster lists); None while there is no topic."""
        if not self.topic_exists():
            return None
        consumer = self.consumer()
        try:
            metadata = consumer.list_topics(self.topic, timeout=self.timeout_s)
        except KafkaException as exc:
            error = kafka_error_of(exc)
            what = f"reading metadata of coordinator topic {self.topic!r}"
            raise unavailable(what, self.config, error.str() if error else exc) from None
        return len(metadata.topics[self.topic].partitions[0].replicas), len(metadata.brokers)

    def ensure_topic(self) -> None:
        if self.topic_exists():
            return
        admin = KafkaAdmin(self.config, timeout_s=self.timeout_s)
        try:
            created = admin.ensure_topic(
                self.topic, 1, COORDINATOR_TOPIC_CONFIG, replication_factor=self.replication_factor
            )
        finally:
            admin.close()
        if created:
            log.info("created coordinator topic %s (compacted, 1 partition)", self.topic)
        deadline = time.monotonic() + self.timeout_s
        while not self.topic_exists():
            if time.monotonic() > deadline:
                raise unavailable(
                    f"creating coordinator topic {self.topic!r}",
                    self.config,
                    "the topic did not appear in the metadata",
                )
            log.info("waiting for coordinator topic %s to appear in the metadata", self.topic)
            time.sleep(0.2)

    def read_to_end(self, apply: Apply) -> None:
        """Apply every record from `position` up to the high watermark taken now, in order."""
        if not self.topic_exists():
            return
        what = f"reading coordinator topic {self.topic!r}"
        deadline = time.monotonic() + self.timeout_s
        low, high = self._watermarks(what, deadline)
        consumer = self.consumer()  # a new one if the watermarks' read renewed it
        self.position = max(self.position, low)
        if self.position >= high:
            return
        consumer.assign([TopicPartition(self.topic, 0, self.position)])
        try:
            while self.position < high:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    detail = f"stuck at offset {self.position} of {high} after {self.timeout_s:g} s"
                    raise unavailable(what, self.config, detail)
                # consume() waits for the whole batch or the timeout: ask for exactly the
                # records left (fewer only if compaction left gaps; then EOF ends it)
                batch = max(1, min(high - self.position, 100_000))
                for message in consumer.consume(num_messages=batch, timeout=min(remaining, 0.2)):
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            self.position = max(self.position, message.offset())
                            continue
                        if ignored_by_assign_only(error) or error.code() in LEADER_MOVING_CODES:
                            continue  # the consumer refreshes its metadata and fetches again
                        self._raise_if_denied(error, "READ", what)
                        if is_unavailable(error):
                            raise unavailable(what, self.config, error.str())
                        raise ExpansionError(f"cannot read {self.topic!r}: {error.str()}")
                    # records past `high` arrive in order too: applying them is consistent
                    offset = message.offset()
                    apply(offset, message.key(), message.value())
                    self.position = offset + 1
        finally:
            consumer.unassign()

    def _watermarks(self, what: str, deadline: float) -> tuple[int, int]:
        """(low, high) of partition 0 from its leader, asked again while the leader moves
        (`_kafka.leader_offsets.consumer_watermarks`)."""
        tp = TopicPartition(self.topic, 0)
        return consumer_watermarks(
            self.consumer, tp, deadline, lambda detail: unavailable(what, self.config, detail)
        )

    def produce(self, records: Sequence[tuple[bytes, bytes | None]]) -> list[int]:
        """Append records in order (acks=all, idempotent); return their offsets."""
        self.ensure_topic()
        producer = self.producer()
        outcomes: list[tuple[KafkaError | None, int | None]] = []

        def on_delivery(err: KafkaError | None, message: Message) -> None:
            outcomes.append((err, message.offset() if err is None else None))

        what = f"writing to coordinator topic {self.topic!r}"
        for key, value in records:
            producer.produce(self.topic, value=value, key=key, partition=0, on_delivery=on_delivery)
        try:
            remaining = producer.flush(self.timeout_s + 5.0)
        except (KafkaException, SystemError) as exc:
            # a fatal idempotence error (no WRITE on any topic); confluent-kafka then runs the
            # purged messages' callbacks with it pending and wraps it in a SystemError
            self._raise_if_denied(
                kafka_error_of(exc) or kafka_error_of(exc.__cause__), "WRITE", what
            )
            raise
        if remaining or len(outcomes) != len(records):
            raise unavailable(what, self.config, f"no acknowledgement within {self.timeout_s:g} s")
        offsets = []
        for error, offset in outcomes:
            if error is not None:
                self._raise_if_denied(error, "WRITE", what)
                if is_unavailable(error):
                    raise unavailable(what, self.config, error.str())
                raise ExpansionError(f"Kafka refused a write to {self.topic!r}: {error.str()}")
            offsets.append(int(offset or 0))
        return offsets


__all__ = ["COORDINATOR_TOPIC_CONFIG", "TopicIO"]
