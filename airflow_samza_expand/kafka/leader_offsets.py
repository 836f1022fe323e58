"""A partition's log start or end offset asked of its leader as a consumer asks it.

Right after a partition leader dies, librdkafka's admin ``list_offsets`` may keep answering no
offset (-1001) from the broker it knew for a while after Kafka elected the new leader; a
consumer's ``get_watermark_offsets(cached=False)`` looks the leader up afresh. `KafkaAdmin`
asks here for the partitions its admin answer left unknown."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from airflow_samza_expand.kafka.auth import AuthWatch
from airflow_samza_expand.kafka.clients import Consumer
from airflow_samza_expand.kafka.errors import CONSUMER_ONLY_SETTINGS

log = logging.getLogger(__name__)


class LeaderOffsets:
    """One consumer (opened on first use, never joining a group) asking partition leaders."""

    def __init__(self, config: Mapping[str, str], auth: AuthWatch, timeout_s: float) -> None:
        self.config = config
        self.timeout_s = timeout_s
        self._auth = auth
        self._consumer: Consumer | None = None

    def ask(self, tp: TopicPartition, spec: OffsetSpec) -> int | None:
        """``tp``'s end offset (``OffsetSpec.latest()``) or log start (otherwise) from its
        leader; None when it has no answer yet."""
        high = isinstance(spec, type(OffsetSpec.latest()))
        try:
            if self._consumer is None:
                settings = {k: v for k, v in self.config.items() if k not in CONSUMER_ONLY_SETTINGS}
                settings.update({"group.id": "samza-expand-watermarks",
                                 "enable.auto.commit": "false"})  # fmt: skip
                self._consumer = Consumer(self._auth.client_settings(settings))
            low, end = self._consumer.get_watermark_offsets(
                tp, timeout=min(self.timeout_s, 5.0), cached=False
            )
        except KafkaException as exc:
            log.debug("asking the leader of %s for its offsets: %s", tp, exc)
            return None
        offset = end if high else low
        return int(offset) if offset is not None and int(offset) >= 0 else None

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


__all__ = ["LeaderOffsets"]
