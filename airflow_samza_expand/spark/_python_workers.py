"""How a Spark application should talk to its Python workers: over Unix domain sockets.

Every read task of the provider's reader (a Python data source), and every Python UDF task, is
a conversation between the executor's JVM and a Python worker. Spark 4.1 and 4.2 hold it over
loopback TCP by default, with Nagle's algorithm on, and each task's Arrow input reached the
worker only after a delayed ACK: the worker waited 32 ms a task in ``pyarrow.ipc.open_stream``
(2 ms over a Unix domain socket) - the stall Spark fixed for its state server (SPARK-51667).
Measured with a Python data source whose read tasks each yield one row, on local[2]: 77 ms
of Spark's time per extra read task over TCP, 39 ms over a Unix domain socket, 9 ms for a JVM
source (docs/testing.md, Read scaling). The stall is per task, so it is what a finer read
split (one task per Kafka partition) pays most.

``spark.python.unix.domain.socket.enabled`` (Spark >= 4.1; an older Spark ignores it) is read
when the application starts: the shipped job sets it (`PYTHON_WORKER_CONF`, a ``--spark-conf``
wins); a user's own job is told at `warn_without_unix_sockets` to set it.

The other per-task cost is Python's: Spark's daemon runs a full ``gc.collect()`` in a reused
worker after every task (``pyspark/daemon.py``), and a worker that has imported pandas, pyarrow,
the Kafka client and this package scans its whole heap each time (about 100 ms measured in the
shipped job's workers), while the next task waits. `freeze_after_first_task` moves that heap,
once per worker process, to the collector's permanent generation (``gc.freeze``): later
collections scan only what later tasks made.
"""

from __future__ import annotations

import gc
import logging
import os
from typing import Any

UNIX_SOCKETS = "spark.python.unix.domain.socket.enabled"
PYTHON_WORKER_CONF: dict[str, str] = {UNIX_SOCKETS: "true"}

log = logging.getLogger("airflow_samza_expand.spark.runtime")


def uses_unix_sockets(spark: Any) -> bool | None:
    """Whether ``spark``'s application talks to its Python workers over Unix domain sockets;
    None where that cannot be read (a Spark Connect session has no SparkContext)."""
    try:
        conf = spark.sparkContext.getConf()
    except Exception:  # noqa: BLE001 - Spark Connect: no SparkContext to ask
        return None
    return str(conf.get(UNIX_SOCKETS, "false")).strip().lower() == "true"


def warn_without_unix_sockets(spark: Any) -> bool:
    """Log how to remove the per-task TCP stall when the application runs without Unix
    domain sockets to its Python workers; whether it warned."""
    if uses_unix_sockets(spark) is not False:
        return False
    log.warning(
        "%s is off: each read task of the provider's reader waits out a delayed TCP "
        "acknowledgement (about 40 ms) between Spark's JVM and its Python worker - start the "
        "application with --conf %s=true (Spark >= 4.1) for the reader's full speed",
        UNIX_SOCKETS, UNIX_SOCKETS,
    )  # fmt: skip
    return True


_FIRST_TASK: dict[int, int] = {}  # worker pid -> its first task's attempt id
_FROZEN: set[int] = set()  # worker pids whose heap is frozen


def freeze_after_first_task() -> None:
    """In a Spark Python worker, at the start of its second task: freeze the heap (module
    docstring). Once per process; its first task has imported what its tasks use, and the
    daemon's collection just before this task has left no garbage to freeze. Frozen objects
    are still freed by reference counting; only a cycle among them stays (bounded: once).
    Outside a Spark task (the driver, a test) it does nothing."""
    pid = os.getpid()
    if pid in _FROZEN:
        return
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return
    attempt = context.taskAttemptId()
    first = _FIRST_TASK.setdefault(pid, attempt)
    if attempt != first:
        gc.freeze()
        _FROZEN.add(pid)
