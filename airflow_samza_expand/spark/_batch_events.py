"""Wake the job's watch when Spark ends a batch, instead of at its next poll.

The watch (`spark._driving.QueryDriver.watch`) commits each finished batch's offsets, and it
polled for them every half second: a commit came up to half a second after its batch, the
barrier's drain and a switch's downtime with it. A `StreamingQueryListener` on the session
sets an event at each progress report (Spark sends one when a batch ends) and when a query
ends; the watch waits on it, with its poll interval as the upper bound.

Spark Connect runs a listener on the server, apart from this process: there (and without a
session) the watch polls as before.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

log = logging.getLogger("airflow_samza_expand.spark.runtime")


class BatchEvents:
    """The listener registered on a session and the event it sets."""

    def __init__(self, spark: Any, listener: Any, ended: threading.Event) -> None:
        self._spark, self._listener, self._ended = spark, listener, ended

    def wait(self, timeout_s: float) -> bool:
        """True once a batch or a query ended since the last call; False after ``timeout_s``."""
        fired = self._ended.wait(timeout_s)
        self._ended.clear()
        return fired

    def close(self) -> None:
        try:
            self._spark.streams.removeListener(self._listener)
        except Exception as exc:  # noqa: BLE001 - a stopped session drops its listeners itself
            log.debug("batch listener not removed: %s", exc)


def listen(spark: Any) -> BatchEvents | None:
    """A `BatchEvents` on ``spark``'s session; None where none can be registered (no session,
    Spark Connect, a failure - logged): the watch then polls."""
    if spark is None or type(spark).__module__.startswith("pyspark.sql.connect"):
        return None
    from pyspark.sql.streaming import StreamingQueryListener

    ended = threading.Event()

    class _BatchEnded(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's names
            pass

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            ended.set()

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            pass

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            ended.set()

    listener = _BatchEnded()
    try:
        spark.streams.addListener(listener)
    except Exception as exc:  # noqa: BLE001 - waking early is an optimisation
        log.warning("no streaming listener (the watch polls every batch instead): %s", exc)
        return None
    return BatchEvents(spark, listener, ended)


__all__ = ["BatchEvents", "listen"]
