"""The job's keyed state in Spark's state store, and the checkpoint's task-set guard.

State is kept with ``applyInPandasWithState``, per ``(task, key)`` by default, or a group of
keys per Spark group (`StatefulFunction`'s layouts): the group's state is one JSON string.
Spark does not order rows inside a group, so the rows of a key are sorted by ``(topic,
partition, offset)`` before the processor sees them.

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


def _in_order(rows: pd.DataFrame, *, by_key: bool = False, by_task: bool = False) -> pd.DataFrame:
    """``rows`` sorted by ([task,] [key,] topic, partition, offset); untouched when already so."""
    offsets = rows["offset"].to_numpy()
    columns = [offsets, rows["partition"].to_numpy()]
    topics = rows["topic"]
    if len(rows) and (topics != topics.iat[0]).any():
        columns.append(pd.factorize(topics, sort=True)[0])
    if by_key:
        columns.append(pd.factorize(rows["key"].fillna(_NULL_KEY), sort=True)[0])
    if by_task:
        columns.append(pd.factorize(rows["task"], sort=True)[0])
    order = np.lexsort(columns)
    if (order == np.arange(len(order))).all():
        return rows.reset_index(drop=True)
    return rows.take(order).reset_index(drop=True)


def _output_frame(tasks: list, keys: list, records: list[int], values: list) -> pd.DataFrame:
    return pd.DataFrame({"task": tasks, "key": keys, "records": records, "value": values})


Outputs = tuple[list, list, list, list]  # task, key, records, value of each output row


def _apply(processor: Any, state: dict, rows: pd.DataFrame, out: Outputs) -> dict:
    """Run the processor over one key's ordered rows; append its outputs to ``out``."""
    new_state, outputs = processor.process(state, rows)
    task, key = rows["task"].iat[0], rows["key"].iat[0]
    tasks, keys, records, values = out
    if not outputs:  # still report the applied records so the per-task counts stay exact
        outputs = [None]
    for i, output in enumerate(outputs):
        tasks.append(task)
        keys.append(key)
        records.append(len(rows) if i == 0 else 0)
        values.append(None if output is None else json.dumps(output, sort_keys=True, default=str))
    return new_state


def _apply_each_key(processor: Any, rows: pd.DataFrame, states: dict, out: Outputs) -> None:
    """Run the processor over each ``(task, key)`` of ``rows`` (sorted by task, key, then
    position) with its state in ``states`` (updated in place; a key not in it starts empty)."""
    tasks = rows["task"].to_numpy()
    keys = rows["key"].fillna(_NULL_KEY).to_numpy()
    bounds = (np.flatnonzero((keys[1:] != keys[:-1]) | (tasks[1:] != tasks[:-1])) + 1).tolist()
    for a, b in zip([0, *bounds], [*bounds, len(rows)], strict=True):
        key_rows = rows.iloc[a:b].reset_index(drop=True)
        name = (key_rows["task"].iat[0], key_rows["key"].iat[0])
        current = states.get(name)
        states[name] = _apply(
            processor, processor.init_state() if current is None else current, key_rows, out
        )


def _saved_order(name: tuple) -> tuple:
    task, key = name
    return (task, key is None, key or "")


class StatefulFunction:
    """The ``applyInPandasWithState`` function: run the processor over one group's rows.

    The processor sees the same thing in every layout (one key's rows in order, that key's
    state); the layouts differ in what one Spark group (one state row) holds:

    * ``buckets == shards == 0``: the group is ``(task, key)`` and its state that key's state.
    * ``buckets > 0``: the group is ``(task, bucket)`` with ``bucket = pmod(xxhash64(key),
      buckets)``; its state maps each key of the bucket to that key's state.
    * ``shards > 0``: the group is ``shard = pmod(xxhash64(task, key), shards)``, whatever
      the number of tasks; its state maps each ``(task, key)`` of the shard to its state.

    Spark's per-group cost (Arrow to pandas, a DataFrame per group) is paid once per group and
    micro-batch: per key, per task and bucket, or at most ``shards`` times. The price is
    rewriting a whole group's state when one of its keys changes.
    """

    def __init__(self, processor_path: str, buckets: int = 0, shards: int = 0) -> None:
        if buckets and shards:
            raise ValueError("state buckets and state shards exclude each other - give one")
        self.processor_path = processor_path
        self.buckets = buckets
        self.shards = shards

    def __call__(self, group_key: tuple, pdfs: Iterator[pd.DataFrame], state: Any) -> Iterator:
        freeze_after_first_task()  # Spark's per-task collection scans less (spark._python_workers)
        processor = _processor(self.processor_path)
        frames = [pdf for pdf in pdfs if len(pdf)]
        if not frames:
            return
        rows = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        out: Outputs = ([], [], [], [])
        if not self.buckets and not self.shards:
            current = json.loads(state.get[0]) if state.exists else processor.init_state()
            new_state = _apply(processor, current, _in_order(rows), out)
            state.update((json.dumps(new_state, sort_keys=True),))
            yield _output_frame(*out)
            return
        rows = _in_order(
            rows.drop(columns=["bucket", "shard"], errors="ignore"),
            by_key=True,
            by_task=bool(self.shards),
        )
        saved = json.loads(state.get[0]) if state.exists else []
        if self.shards:
            states = {(t, k): v for t, k, v in saved}
        else:
            task = group_key[0]
            states = {(task, k): v for k, v in saved}
        _apply_each_key(processor, rows, states, out)
        ordered = sorted(states.items(), key=lambda item: _saved_order(item[0]))
        if self.shards:
            doc = [[t, k, v] for (t, k), v in ordered]
        else:
            doc = [[k, v] for (_, k), v in ordered]
        state.update((json.dumps(doc, sort_keys=True),))
        yield _output_frame(*out)


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


def state_layout(buckets: int, shards: int = 0) -> str:
    """Name of a state layout: ``key``, ``bucket/<n>`` or ``shard/<n>``."""
    if shards:
        return f"shard/{shards}"
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
                f"not {layout!r} - pass the same --state-buckets or --state-shards as before "
                "or use a new --checkpoint-dir"
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
