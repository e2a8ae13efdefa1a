"""A function wrapped to take a while and be counted: how many calls, how many at once at most.
What the tests of work taken in turns (infosvc/web/turns.py) read."""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator, TypeVar

from support.server import wait_for

T = TypeVar("T")


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

    def during_flood(self, get: Callable[..., Any], paths: list[str], then: Callable[[], T]) -> tuple[list[int], T]:
        """`then()` once a reader for each path (`get(path)`, at once) has asked and the work is
        under way: the flood's statuses, and what `then` gave."""
        with ThreadPoolExecutor(len(paths)) as pool:
            flood = [pool.submit(get, path, timeout=60) for path in paths]
            wait_for(lambda: self.running, timeout=10, message="the flood's work under way")
            time.sleep(0.2)  # every flood request has arrived: the places are taken
            result = then()
            return [f.result().status for f in flood], result
