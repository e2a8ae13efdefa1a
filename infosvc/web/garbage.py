"""The cyclic garbage collector's schedule in the server: young collections by the clock, a full
collection every few minutes, and CPython's own trigger off while the app runs.

CPython starts a collection when allocations minus deallocations of tracked objects pass a
threshold. The server's state is mostly replaced, not grown: a report builds ~100 tracked
objects for its host and frees the ~100 of that host's report before, so the count hardly moves
while the young generations fill with every host object built since their last pass. On a soak
of 10,000 agents (docs/reliability.md) a middle-generation pass then had ~1,000,000 live objects
to look at and held the event loop for 0.45 s, once or twice a minute; each such stall made ~75
reports late. By the clock, a young pass looks at what half a second built (~15 ms at 500
reports/s, bench/soak.py --sample shows each pass), and what survives it goes straight to the old
generation, which only the full pass looks at: one pause every FULL_SECONDS, as long as the live
objects take to walk (~0.6 s at 10,000 hosts). Cyclic garbage that outlived a young pass waits for
the full pass, so memory held by garbage is bounded by one period's worth.
"""

from __future__ import annotations

import asyncio
import gc
import time
from typing import AsyncIterator, Callable

#: between two young passes (generations 0 and 1)
YOUNG_SECONDS = 0.5
#: between two full passes
FULL_SECONDS = 600.0


class CollectionSchedule:
    """Which pass is due at each tick: a full one every `full` seconds, a young one otherwise.
    `collect` and `clock` are gc.collect and time.monotonic but for tests."""

    def __init__(self, *, full: float = FULL_SECONDS, clock: Callable[[], float] = time.monotonic,
                 collect: Callable[[int], int] = gc.collect) -> None:
        self.full = full
        self.clock = clock
        self.collect = collect
        self._full_at = clock()
        #: passes made, by generation collected (1: young, 2: full)
        self.passes = {1: 0, 2: 0}

    def tick(self) -> int:
        """Collect what is due; returns the oldest generation collected."""
        now = self.clock()
        generation = 2 if now - self._full_at >= self.full else 1
        if generation == 2:
            self._full_at = now
        self.collect(generation)
        self.passes[generation] += 1
        return generation


async def collect_on_schedule(schedule: CollectionSchedule, interval: float = YOUNG_SECONDS) -> None:
    while True:
        await asyncio.sleep(interval)
        schedule.tick()


async def scheduled_collection(schedule: CollectionSchedule | None = None) -> AsyncIterator[None]:
    """For the app's cleanup_ctx: CPython's trigger off and the schedule on while the app runs."""
    was_enabled = gc.isenabled()
    gc.disable()
    task = asyncio.create_task(collect_on_schedule(schedule or CollectionSchedule()))
    try:
        yield
    finally:
        task.cancel()
        if was_enabled:
            gc.enable()
