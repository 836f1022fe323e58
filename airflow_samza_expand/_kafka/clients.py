"""The package's Kafka clients: confluent-kafka's, with librdkafka's log lines in Python logging.

Every Producer, Consumer and AdminClient the package creates is one of these (a test checks
that no module constructs confluent-kafka's directly), so librdkafka never prints `%5|...|PARTCNT|`
lines to stderr: they become records of the `airflow_samza_expand.librdkafka` logger at the
level of their syslog level (`_kafka.config.with_logger`). The logger object is added here, at
construction, and never enters a config dict that could be serialised.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import confluent_kafka
from confluent_kafka.admin import AdminClient as _AdminClient

from airflow_samza_expand._kafka.config import with_logger


class Producer(confluent_kafka.Producer):
    """`confluent_kafka.Producer` whose librdkafka logs go to Python logging (served by poll)."""

    def __init__(self, config: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(with_logger(config), **kwargs)


class Consumer(confluent_kafka.Consumer):
    """`confluent_kafka.Consumer` whose librdkafka logs go to Python logging (served by poll)."""

    def __init__(self, config: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(with_logger(config), **kwargs)


class AdminClient(_AdminClient):
    """`confluent_kafka.admin.AdminClient` whose librdkafka logs go to Python logging."""

    def __init__(self, config: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(with_logger(config), **kwargs)


__all__ = ["AdminClient", "Consumer", "Producer"]
