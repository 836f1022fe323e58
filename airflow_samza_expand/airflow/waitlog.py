"""One log line per change of what a wait waits for, not one per poll (issue 41 item 8)."""

from __future__ import annotations

import logging


class WaitLog:
    """Logs a wait's message when it differs from the one logged last."""

    def __init__(self, log: logging.Logger | logging.LoggerAdapter) -> None:  # type: ignore[type-arg]
        self.log = log
        self.last: str | None = None

    def info(self, message: str, since: str = "") -> bool:
        """Log `message` (and `since`, e.g. the time waited so far) unless `message` repeats
        the last one; whether it was logged."""
        if message == self.last:
            return False
        self.last = message
        self.log.info("%s%s", message, since)
        return True


__all__ = ["WaitLog"]
