"""Logging without floods: one line per kind of event per interval, with a count of the lines left
out. Whatever a client can repeat at will (a refused token, a malformed request, a write refused by
a full disk) is logged through one, so a client cannot fill the log, nor the disk under it.
Used by the HTTP layer and the store alike, so it belongs to neither."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Final

__all__ = ["LOG_INTERVAL_SECONDS", "MAX_KINDS", "LogLimiter"]

#: One log line per kind of event per this many seconds, at most.
LOG_INTERVAL_SECONDS: Final = 10.0
#: Kinds remembered at once: past it, those whose interval has passed are forgotten.
MAX_KINDS: Final = 1024


class LogLimiter:
    """At most one line per `interval` seconds for each kind of event; the lines left out are counted
    in the next line of that kind. Thread-safe: the store's writer thread logs through one."""

    def __init__(self, logger: logging.Logger, interval: float = LOG_INTERVAL_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.interval = interval
        self.clock = clock
        self._kinds: dict[str, tuple[float, int]] = {}  # kind -> (when its last line was written, left out since)
        self._lock = threading.Lock()

    def log(self, level: int, kind: str, message: str, *args: Any, exc_info: bool = False) -> None:
        now = self.clock()
        with self._lock:
            last, left_out = self._kinds.get(kind, (-float("inf"), 0))
            if now - last < self.interval:
                self._kinds[kind] = (last, left_out + 1)
                return
            if len(self._kinds) >= MAX_KINDS:
                self._kinds = {k: v for k, v in self._kinds.items() if now - v[0] < self.interval}
            self._kinds[kind] = (now, 0)
        if left_out:
            message += f" (and {left_out} more like it in the last {self.interval:g} s)"
        self.logger.log(level, message, *args, exc_info=exc_info)

    def info(self, kind: str, message: str, *args: Any) -> None:
        self.log(logging.INFO, kind, message, *args)

    def warning(self, kind: str, message: str, *args: Any) -> None:
        self.log(logging.WARNING, kind, message, *args)

    def error(self, kind: str, message: str, *args: Any) -> None:
        self.log(logging.ERROR, kind, message, *args)
