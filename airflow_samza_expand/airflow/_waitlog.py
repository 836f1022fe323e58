"""One log line per change of what a wait waits for, not one per poll."""

from __future__ import annotations

import logging


class WaitLog:
    """Logs a wait's message when it differs from the one logged last."""

    def __init__(self, log: logging.Logger | logging.LoggerAdapter) -> None:  # type: ignore[type-arg]
        self.log = log
        self.last: str | None = None

    def info(self, message: str, since: str = "", key: str | None = None) -> bool:
        """Log `message` (and `since`, e.g. the time waited so far) unless its `key` (what it
        waits for; default the message itself) repeats the last one; whether it was logged."""
        key = message if key is None else key
        if key == self.last:
            return False
        self.last = key
        self.log.info("%s%s", message, since)
        return True


__all__ = ["WaitLog"]
