"""A function wrapped to take a while and be counted: how many calls, how many at once at most.
What the tests of work taken in turns (infosvc/web/turns.py) read."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Iterator


class Overlap:
    """`with overlap.timed():` around the work: counts it, and holds it `delay` seconds."""

    def __init__(self, delay: float = 0.3) -> None:
        self.delay = delay
        self.calls = 0
        self.running = 0
        self.most = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def timed(self) -> Iterator[None]:
        with self._lock:
            self.calls += 1
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            time.sleep(self.delay)
            yield
        finally:
            with self._lock:
                self.running -= 1
