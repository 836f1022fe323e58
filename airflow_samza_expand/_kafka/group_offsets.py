"""Committed offsets of consumer groups, read through one consumer per group (never joining)."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping

from confluent_kafka import KafkaException, TopicPartition

from airflow_samza_expand._kafka.auth import AuthWatch, watched
from airflow_samza_expand._kafka.authz import raise_if_denied, raise_if_group_denied
from airflow_samza_expand._kafka.clients import Consumer
from airflow_samza_expand._kafka.errors import (
    CONSUMER_ONLY_SETTINGS,
    is_unavailable,
    kafka_error_of,
    unavailable,
)
from airflow_samza_expand.core.errors import ExpansionError


class GroupOffsetReader:
    """Reads committed offsets of any group; keeps one reader consumer per group."""

    def __init__(self, config: Mapping[str, str], auth: AuthWatch, timeout_s: float) -> None:
        self.config = config  # the admin's own dict
        self.timeout_s = timeout_s
        self.readers: dict[str, Consumer] = {}
        self._auth = auth
        self._lock = threading.Lock()

    def _reader(self, group: str) -> Consumer:
        """A consumer of `group` that only ever reads its committed offsets (never joins or
        commits: no subscribe, no assign, auto-commit off)."""
        reader = self.readers.get(group)
        if reader is None:
            settings = {k: v for k, v in self.config.items() if k not in CONSUMER_ONLY_SETTINGS}
            settings.update(
                {
                    "group.id": group,
                    "enable.auto.commit": "false",
                    "enable.auto.offset.store": "false",
                }
            )
            reader = Consumer(self._auth.client_settings(settings))
            self.readers[group] = reader
        return reader

    def read(
        self, group: str, topic_partitions: Mapping[str, Iterable[int]]
    ) -> dict[str, dict[int, int | None]]:
        """Committed offsets of `group` (None = nothing committed): one OffsetFetch request.

        Read through a consumer of the group (`Consumer.committed`), not through
        `AdminClient.list_consumer_group_offsets`: librdkafka (2.16 included) crashes the whole
        process with a segmentation fault when that admin call gets a group-level coordinator
        error such as COORDINATOR_NOT_AVAILABLE (librdkafka issue #5040), which a real cluster
        returns whenever a group coordinator moves. The consumer path turns the same error into
        a KafkaUnavailableError. The reader is kept per group, so its coordinator is looked up
        once and a poll costs one OffsetFetch however long one waits.
        """
        partitions = [
            TopicPartition(topic, int(p)) for topic, ps in topic_partitions.items() for p in ps
        ]
        result: dict[str, dict[int, int | None]] = {t: {} for t in topic_partitions}
        if not partitions:
            return result
        what = f"reading committed offsets of group {group!r}"
        with self._lock:
            reader = self._reader(group)
            try:
                # slices: a group the principal may not describe is reported only on the
                # reader's queue, while committed() would wait for a coordinator until timeout
                answer = watched(
                    lambda step: reader.committed(partitions, timeout=step),
                    lambda _t: raise_if_group_denied(reader, group, what, self.config),
                    self._auth,
                    self.timeout_s,
                    what,
                    self.config,
                )
            except KafkaException as exc:
                raise_if_group_denied(reader, group, what, self.config)
                self._auth.raise_if_failed(what, self.config)
                error = kafka_error_of(exc)
                raise_if_denied(
                    error, operation="DESCRIBE", resource="GROUP", name=group, what=what,
                    config=self.config,
                )  # fmt: skip
                if error is None or is_unavailable(error):
                    raise unavailable(what, self.config, error.str() if error else exc) from None
                raise ExpansionError(
                    f"cannot read the committed offsets of group {group!r}: "
                    f"{error.name()}: {error.str()}"
                ) from None
            finally:
                reader.poll(0)  # serve queued callbacks (errors, statistics); no assignment
        for tp in answer:
            if tp.error is not None:
                raise_if_denied(
                    tp.error, operation="DESCRIBE", resource="TOPIC", name=tp.topic, what=what,
                    config=self.config,
                )  # fmt: skip
                if is_unavailable(tp.error):
                    raise unavailable(what, self.config, tp.error.str())
                raise ExpansionError(
                    f"cannot read the committed offset of group {group!r} on "
                    f"{tp.topic}[{tp.partition}]: {tp.error.str()}"
                )
            offset = int(tp.offset)
            result.setdefault(tp.topic, {})[tp.partition] = None if offset < 0 else offset
        for topic, ps in topic_partitions.items():
            for p in ps:
                result[topic].setdefault(int(p), None)
        return result

    def commit(self, group: str, offsets: Mapping[str, Mapping[int, int]]) -> None:
        """Commit ``offsets`` (next offset to read per partition) for ``group`` without joining
        it (generation -1: Kafka refuses it while the group has members)."""
        partitions = [
            TopicPartition(topic, int(p), int(o))
            for topic, ps in sorted(offsets.items())
            for p, o in sorted(ps.items())
        ]
        if not partitions:
            return
        what = f"committing offsets of group {group!r}"
        with self._lock:
            try:
                answer = self._reader(group).commit(offsets=partitions, asynchronous=False)
            except KafkaException as exc:
                error = kafka_error_of(exc)
                if error is not None and is_unavailable(error):
                    raise unavailable(what, self.config, error.str()) from None
                raise ExpansionError(
                    f"{what}: {exc} - stop the group's consumers first (Kafka takes a commit "
                    "from outside the group only while it has no members)"
                ) from None
        for tp in answer or []:
            if tp.error is not None:
                raise ExpansionError(f"{what} on {tp.topic}[{tp.partition}]: {tp.error.str()}")

    def close(self) -> None:
        """Close the readers (a later read opens new ones)."""
        with self._lock:
            readers, self.readers = list(self.readers.values()), {}
        for reader in readers:
            reader.close()


__all__ = ["GroupOffsetReader"]
