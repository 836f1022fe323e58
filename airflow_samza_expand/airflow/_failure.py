"""The chain's ``on_failure_callback``: when a step has failed for good (retries spent, or a
refusal), log where the expansion stands - grown or not, vN+1 written or not, who runs which
job model, a standby waiting - and what to do (`_protocol.recovery`)."""

from __future__ import annotations

import logging
from typing import Any

from airflow_samza_expand._protocol.recovery import report_failure
from airflow_samza_expand.airflow._shell import KafkaClients

log = logging.getLogger(__name__)


def on_step_failure(context: Any) -> None:
    """Airflow callback; never raises (a callback failure must not hide the step's error)."""
    task = context.get("task")
    expansion_id = str(getattr(task, "expansion_id", "") or "")
    if not isinstance(task, KafkaClients) or not expansion_id or "{{" in expansion_id:
        return  # no expansion yet (the plan failed before it made one)
    error = context.get("exception")
    message = f"{type(error).__name__}: {error}" if error is not None else "failed"
    try:
        report_failure(task.admin, task.store, expansion_id, task.task_id, message[:1000])
    except Exception as exc:  # noqa: BLE001 - best effort: the step's own error stands
        log.warning("could not describe the state of expansion %s: %s", expansion_id, exc)
    finally:
        task.close_clients()


__all__ = ["on_step_failure"]
