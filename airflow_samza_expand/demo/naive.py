"""The naive mapping writer - a negative control, never use it for real.

It writes job model vN+1 as plain Samza ``GroupByPartition`` would after an expansion: every
partition its own task, so partition 3 of a 4-partition topic goes to a new task "Partition 3"
although its keys' state lives in task "Partition 1". It keeps the job's grouper label, so the
next expansion still plans. The job must run with ``--allow-task-change`` to accept it; keys
that move then restart their counts from zero, which the verifier must catch.
"""

from __future__ import annotations

from typing import Any

from airflow_samza_expand.airflow.operators._common import update_expansion, utc_now_iso
from airflow_samza_expand.airflow.operators.write_model import WriteJobModelOperator
from airflow_samza_expand.core.groupers import GroupByPartition
from airflow_samza_expand.core.model import (
    JobModel,
    StreamPartitionCounts,
    SystemStreamPartition,
    mapping_from_groups,
)


def naive_next_model(latest: JobModel, live: dict[str, int], writer: str) -> JobModel:
    """vN+1 with plain GroupByPartition over the live partition counts."""
    streams = tuple(
        StreamPartitionCounts(s.system, s.stream, live.get(s.stream, s.current), s.initial)
        for s in latest.streams
    )
    ssps = [SystemStreamPartition(s.system, s.stream, p) for s in streams for p in range(s.current)]
    return JobModel(
        version=latest.version + 1,
        job_name=latest.job_name,
        streams=streams,
        ssp_to_task=mapping_from_groups(GroupByPartition().group(ssps)),
        grouper=latest.grouper,
        expansion_algorithm=latest.expansion_algorithm,
        created_by=writer,
    )


class NaiveWriteJobModelOperator(WriteJobModelOperator):
    """Writes vN+1 with plain GroupByPartition (see the module docstring)."""

    def _write(self, admin: Any, store: Any, writer: str) -> dict[str, Any]:
        latest = store.latest_job_model()
        record = store.get_expansion(self.expansion_id) if self.expansion_id else None
        if record is not None and latest.version != int(record["old_version"]):
            self.log.info("Job model v%d already written: nothing to do.", latest.version)
            return _result(latest, written=False)
        live = admin.partition_counts(sorted(latest.partition_counts()))
        model = store.write_job_model(naive_next_model(latest, live, writer))
        self.log.warning(
            "NAIVE writer: job model v%d maps each partition to its own task %s",
            model.version,
            model.tasks(),
        )
        if self.expansion_id:
            update_expansion(
                store,
                self.expansion_id,
                status="job-model-written",
                job_model_version=model.version,
                job_model_written_at=utc_now_iso(),
            )
        return _result(model, written=True)


def _result(model: JobModel, *, written: bool) -> dict[str, Any]:
    return {
        "job_name": model.job_name,
        "version": model.version,
        "written": written,
        "counts": model.partition_counts(),
        "tasks": len(model.tasks()),
        "created_by": model.created_by,
    }
