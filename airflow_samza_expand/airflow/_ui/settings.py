"""The UI plugin's options: section ``[samza_expand]`` of the Airflow configuration (or the
``AIRFLOW__SAMZA_EXPAND__<OPTION>`` environment variables), read on every request."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

SECTION = "samza_expand"


@dataclass(frozen=True)
class UiSettings:
    """What the pages read and how long they wait."""

    jobs: tuple[str, ...] = ()  # ui_jobs: job names listed even before they have records
    kafka_config_id: str = "kafka_default"  # ui_kafka_config_id
    coordinator: str = "kafka"  # ui_coordinator: "kafka", "kafka://<topic>" or a path / URL
    discover: bool = True  # ui_discover: list __samza_coordinator_* topics of the connection
    processor_ttl_s: float = 30.0  # ui_processor_ttl_s: a silent processor is dead after it
    timeout_s: float = 5.0  # ui_timeout_s: each Kafka read of a page gives up after it
    log_dirs: tuple[str, ...] = (os.path.join(tempfile.gettempdir(), "samza-expand"),)


def _list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.replace("\n", ",").split(",") if part.strip())


def load_settings() -> UiSettings:
    """The current options (defaults where unset)."""
    from airflow.configuration import conf

    default = UiSettings()

    def get(option: str, fallback: str) -> str:
        return str(conf.get(SECTION, option, fallback=fallback))

    return UiSettings(
        jobs=_list(get("ui_jobs", "")),
        kafka_config_id=get("ui_kafka_config_id", default.kafka_config_id),
        coordinator=get("ui_coordinator", default.coordinator),
        discover=get("ui_discover", "true").lower() in ("true", "1", "yes"),
        processor_ttl_s=float(get("ui_processor_ttl_s", str(default.processor_ttl_s))),
        timeout_s=float(get("ui_timeout_s", str(default.timeout_s))),
        log_dirs=_list(get("ui_log_dirs", ",".join(default.log_dirs))),
    )
