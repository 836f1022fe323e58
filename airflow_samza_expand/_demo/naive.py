"""The naive mapping writer - a negative control, never use it for real.

It writes job model vN+1 as plain Samza ``GroupByPartition`` would after an expansion: every
partition its own task, so partition 3 of a 4-partition topic goes to a new task "Partition 3"
although its keys' state lives in task "Partition 1". The model is labelled with the plain
grouper it really uses (every store refuses a FixedTasks model that breaks fixed tasks), so no
later expansion plans on it. The job must run with ``--allow-task-change`` to accept it; keys
that move then restart their counts from zero, which the verifier must catch.

`naive_next_model` is the protocol's ``next_model`` of the write step
(`_protocol.steps.write_model.write_job_model`); `NaiveWriteJobModelOperator` is the public
``WriteJobModelOperator`` with that flag set.
"""

from __future__ import annotations

from typing import Any

from airflow_samza_expand.airflow.operators._write_model import WriteJobModelOperator
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
        grouper="GroupByPartition",
        expansion_algorithm=latest.expansion_algorithm,
        created_by=writer,
    )


class NaiveWriteJobModelOperator(WriteJobModelOperator):
    """``WriteJobModelOperator(next_model=naive_next_model)`` (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(next_model=naive_next_model, **kwargs)
