"""The ack step: wait until the restarted job runs job model vN+1 (`ack_poll`: the wait's one
implementation; its log names who the chosen restart strategy expects, `_protocol.restart`) and
note who does (`AckResult`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_samza_expand._protocol import records
from airflow_samza_expand._protocol.poll import Poll
from airflow_samza_expand._protocol.restart import RestartChoice
from airflow_samza_expand.core._lease import Lease
from airflow_samza_expand.core._liveness import acknowledging
from airflow_samza_expand.core._record import ExpansionRecord, ExpansionStatus
from airflow_samza_expand.core.errors import ExpansionError
from airflow_samza_expand.store import CoordinatorStore

DEFAULT_ACK_TIMEOUT_S = 1800.0  # for the restarted job to acknowledge job model vN+1


@dataclass(frozen=True)
class AckResult:
    """``results["ack"]`` and the task's XCom: the version, who runs it, what the others do."""

    version: int
    running: list[str] = field(default_factory=list)
    others: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "running": list(self.running), "others": dict(self.others)}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> AckResult:
        return cls(
            int(doc["version"]), list(doc.get("running") or ()), dict(doc.get("others") or {})
        )


def record_ack(
    store: CoordinatorStore, expansion_id: str, result: Mapping[str, Any], lease: Lease | None
) -> ExpansionRecord | None:
    """The ack step's end with its result (`AckResult` keys; any others are kept)."""
    _ready(store, expansion_id)
    return records.record_step(store, expansion_id, "ack", None, dict(result), lease)


def _ready(store: CoordinatorStore, expansion_id: str) -> ExpansionRecord:
    """The record, once job model vN+1 is written (InvalidTransitionError before: nothing to
    acknowledge yet, and nothing is written)."""
    record = records.require(store, expansion_id)
    records.check_after(record, ExpansionStatus.JOB_MODEL_WRITTEN, "ack")
    return record


def ack_poll(
    store: CoordinatorStore,
    version: int,
    min_processors: int = 1,
    *,
    accept_stopped: bool = False,
    expansion_id: str | None = None,
    lease: Lease | None = None,
) -> Poll:
    """Done once `min_processors` live active processors heartbeat ``running`` job model
    `version` (a dead one never counts, nor a standby; with `accept_stopped`, a clean
    ``stopped`` counts too: a run that ended; a ``failed`` one alone is a refusal). With
    `expansion_id`, the first poll is the start of the expansion's ``ack`` step."""
    choice = None
    if expansion_id:
        record = _ready(store, expansion_id)
        choice = RestartChoice.of_record(
            records.begin(store, expansion_id, "ack", fence=lease, record=record)
        )
    processors = store.processors()
    mine = {p: s for p, s in processors.items() if s.get("job_model_version") == version}
    running = acknowledging(processors, version)
    if accept_stopped:
        running = sorted({*running, *(p for p, s in mine.items() if s.get("state") == "stopped")})
    others = {
        pid: f"{p.get('state')} v{p.get('job_model_version')}"
        for pid, p in sorted(processors.items())
        if pid not in running
    }
    failed = sorted(p for p, s in mine.items() if s.get("state") == "failed")
    if accept_stopped and failed and not running:
        raise ExpansionError(
            f"processors {failed} of job {store.job_name!r} failed on job model v{version} - "
            "read the Spark log of the submit step, fix, clear the task"
        )
    info = AckResult(version, running, others).to_dict()
    if len(running) >= min_processors:
        return Poll(True, f"job {store.job_name} runs job model v{version}: {running}", info)
    by = choice.strategy.acknowledged_by if choice is not None else ""
    by = f" ({by})" if by else ""
    return Poll(
        False,
        f"waiting for {min_processors} processor(s) of {store.job_name} to run job model "
        f"v{version}{by}: running {running or 'none'}, others {others or 'none'}",
        detail=info,
    )


__all__ = ["AckResult", "ack_poll", "record_ack"]
