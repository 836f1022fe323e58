"""Per-(task, key) state in Spark's state store, and the checkpoint's task-set guard.

State is kept with ``applyInPandasWithState`` keyed by ``(task, key)``: the processor's state
dict is stored as one JSON string per group. Spark does not order rows inside a group, so the
rows of a group are sorted by ``(topic, partition, offset)`` before the processor sees them.

Beside Spark's checkpoint the job stores the task set it ran with (`TASK_SET_FILE`). A restart
under a job model whose tasks differ (e.g. plain GroupByPartition after a partition expansion,
which adds tasks and moves keys to them) would silently restart the moved keys' state from
scratch, so it is refused unless explicitly allowed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from airflow_samza_expand.core.errors import ExpansionError
from airflow_samza_expand.core.model import JobModel, utc_now_iso
from airflow_samza_expand.spark._python_workers import freeze_after_first_task

STATE_SCHEMA = "state string"
# What the stateful operator emits: one row per processor output. ``records`` is the number of
# input records the group applied in this micro-batch (on the group's first output row, else 0).
OUTPUT_SCHEMA = "task string, key string, records long, value string"
SORT_COLUMNS = ["topic", "partition", "offset"]
_NULL_KEY = "\x00<null key>"

TASK_SET_FILE = "samza-expand-tasks.json"


class IncompatibleCheckpointError(ExpansionError):
    """The checkpoint was written under a task set the current job model does not keep."""


_processors: dict[str, Any] = {}


def _processor(path: str) -> Any:
    """The processor for ``path``, loaded once per Python worker."""
    from airflow_samza_expand.spark._processor import load_processor

    if path not in _processors:
        _processors[path] = load_processor(path)
    return _processors[path]


def _in_order(rows: pd.DataFrame, *, by_key: bool = False) -> pd.DataFrame:
    """``rows`` sorted by ([key,] topic, partition, offset); untouched when already so."""
    offsets = rows["offset"].to_numpy()
    columns = [offsets, rows["partition"].to_numpy()]
    topics = rows["topic"]
    if len(rows) and (topics != topics.iat[0]).any():
        columns.append(pd.factorize(topics, sort=True)[0])
    if by_key:
        columns.append(pd.factorize(rows["key"].fillna(_NULL_KEY), sort=True)[0])
    order = np.lexsort(columns)
    if (order == np.arange(len(order))).all():
        return rows.reset_index(drop=True)
    return rows.take(order).reset_index(drop=True)


def _output_frame(task: str, keys: list, records: list[int], values: list) -> pd.DataFrame:
    return pd.DataFrame(
        {"task": [task] * len(keys), "key": keys, "records": records, "value": values}
    )


def _apply(processor: Any, state: dict, rows: pd.DataFrame, out: tuple[list, list, list]) -> dict:
    """Run the processor over one key's ordered rows; append its outputs to ``out``."""
    new_state, outputs = processor.process(state, rows)
    key = rows["key"].iat[0]
    keys, records, values = out
    if not outputs:  # still report the applied records so the per-task counts stay exact
        keys.append(key)
        records.append(len(rows))
        values.append(None)
    for i, output in enumerate(outputs):
        keys.append(key)
        records.append(len(rows) if i == 0 else 0)
        values.append(json.dumps(output, sort_keys=True, default=str))
    return new_state


class StatefulFunction:
    """The ``applyInPandasWithState`` function: run the processor over one group's rows.

    ``buckets == 0``: the group is ``(task, key)`` and its state is that key's state.
    ``buckets > 0``: the group is ``(task, bucket)`` with ``bucket = pmod(xxhash64(key),
    buckets)``; its state maps each key of the bucket to that key's state. The processor sees
    the same thing either way (one key's rows in order, that key's state); the bucketed layout
    pays Spark's per-group cost once per bucket instead of once per key, at the price of
    rewriting a whole bucket's state when one of its keys changes.
    """

    def __init__(self, processor_path: str, buckets: int = 0) -> None:
        self.processor_path = processor_path
        self.buckets = buckets

    def __call__(self, group_key: tuple, pdfs: Iterator[pd.DataFrame], state: Any) -> Iterator:
        freeze_after_first_task()  # Spark's per-task collection scans less (spark._python_workers)
        processor = _processor(self.processor_path)
        frames = [pdf for pdf in pdfs if len(pdf)]
        if not frames:
            return
        rows = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        task = group_key[0]
        out: tuple[list, list, list] = ([], [], [])
        if not self.buckets:
            current = json.loads(state.get[0]) if state.exists else processor.init_state()
            new_state = _apply(processor, current, _in_order(rows), out)
            state.update((json.dumps(new_state, sort_keys=True),))
            yield _output_frame(task, *out)
            return
        rows = _in_order(rows.drop(columns=["bucket"], errors="ignore"), by_key=True)
        saved = json.loads(state.get[0]) if state.exists else []
        states = {k: v for k, v in saved}
        keys = rows["key"].fillna(_NULL_KEY).to_numpy()
        bounds = np.flatnonzero(keys[1:] != keys[:-1]) + 1
        starts = [0, *bounds.tolist()]
        ends = [*bounds.tolist(), len(rows)]
        for a, b in zip(starts, ends, strict=True):
            key_rows = rows.iloc[a:b].reset_index(drop=True)
            key = key_rows["key"].iat[0]
            current = states.get(key)
            states[key] = _apply(
                processor, processor.init_state() if current is None else current, key_rows, out
            )
        ordered = sorted(states.items(), key=lambda kv: (kv[0] is None, kv[0] or ""))
        state.update((json.dumps([[k, v] for k, v in ordered], sort_keys=True),))
        yield _output_frame(task, *out)


# -- checkpoint task-set guard -----------------------------------------------------------------


def _task_set_path(checkpoint_dir: str) -> str:
    return os.path.join(checkpoint_dir, TASK_SET_FILE)


def _local_path(checkpoint_dir: str) -> str:
    if checkpoint_dir.startswith("file://"):
        return checkpoint_dir[len("file://") :]
    if "://" in checkpoint_dir:
        raise ValueError(
            f"checkpoint dir {checkpoint_dir!r}: only local paths (or file://) are supported "
            "for the task-set guard - give a local or mounted path"
        )
    return checkpoint_dir


def _has_spark_checkpoint(path: str) -> bool:
    offsets = os.path.join(path, "offsets")
    return os.path.isdir(offsets) and any(not n.startswith(".") for n in os.listdir(offsets))


def read_task_set(checkpoint_dir: str) -> dict[str, Any] | None:
    """The task-set record beside the checkpoint, or None when there is none."""
    path = _task_set_path(_local_path(checkpoint_dir))
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise IncompatibleCheckpointError(
            f"task-set record {path} is not JSON ({exc}) - restore it or start from an "
            "empty checkpoint directory"
        ) from None


def state_layout(buckets: int) -> str:
    """Name of a state layout: ``key`` or ``bucket/<n>``."""
    return f"bucket/{buckets}" if buckets else "key"


def check_task_set(
    checkpoint_dir: str, model: JobModel, *, allow_task_change: bool, layout: str = "key"
) -> list[str]:
    """Refuse a checkpoint written under a task set ``model`` does not keep.

    Compatible: same job, same task names, and every SSP recorded in the checkpoint still in
    the task it was in. Returns the list of differences found (empty when compatible); raises
    `IncompatibleCheckpointError` for them unless ``allow_task_change``.
    """
    path = _local_path(checkpoint_dir)
    record = read_task_set(checkpoint_dir)
    if record is None:
        if _has_spark_checkpoint(path):
            problems = [f"checkpoint {path} has Spark offsets but no {TASK_SET_FILE}"]
        else:
            return []
    else:
        problems = []
        if record.get("job_name") != model.job_name:
            raise IncompatibleCheckpointError(
                f"checkpoint {path} belongs to job {record.get('job_name')!r}, not "
                f"{model.job_name!r} - give this job its own --checkpoint-dir"
            )
        if record.get("state_layout", "key") != layout:
            raise IncompatibleCheckpointError(
                f"checkpoint {path} keeps state in layout {record.get('state_layout', 'key')!r}, "
                f"not {layout!r} - pass the same --state-buckets as before or use a new "
                "--checkpoint-dir"
            )
        old_tasks = set(record.get("tasks", []))
        new_tasks = set(model.tasks())
        if old_tasks != new_tasks:
            added = sorted(new_tasks - old_tasks)
            removed = sorted(old_tasks - new_tasks)
            problems.append(f"task set changed (added {added}, removed {removed})")
        moved = []
        current = {str(ssp): task for ssp, task in model.ssp_to_task.items()}
        for ssp, task in sorted(record.get("ssp_to_task", {}).items()):
            if ssp in current and current[ssp] != task:
                moved.append(f"{ssp}: {task!r} -> {current[ssp]!r}")
        if moved:
            problems.append("SSPs moved to other tasks: " + "; ".join(moved[:10]))
    if problems and not allow_task_change:
        written = "" if record is None else f" (written under job model v{record.get('version')})"
        raise IncompatibleCheckpointError(
            f"checkpoint {path}{written} is incompatible with job model v{model.version} "
            f"(grouper {model.grouper}): {'; '.join(problems)}. Keyed state lives per task, so "
            "this would lose or split state. Expand with a FixedTasks grouper "
            "(GroupByPartitionFixedTasks), use a new --checkpoint-dir, or pass "
            "--allow-task-change to accept the state loss"
        )
    return problems


def write_task_set(checkpoint_dir: str, model: JobModel, layout: str = "key") -> None:
    """Record ``model``'s task set beside the checkpoint (atomic replace)."""
    path = _local_path(checkpoint_dir)
    os.makedirs(path, exist_ok=True)
    doc = {
        "job_name": model.job_name,
        "version": model.version,
        "grouper": model.grouper,
        "tasks": model.tasks(),
        "ssp_to_task": {str(ssp): task for ssp, task in sorted(model.ssp_to_task.items())},
        "state_layout": layout,
        "written_at": utc_now_iso(),
    }
    target = _task_set_path(path)
    tmp = target + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(doc, handle, sort_keys=True, indent=1)
    os.replace(tmp, target)
