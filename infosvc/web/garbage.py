"""The cyclic garbage collector's schedule in the server: young passes by the clock as well as by
CPython's allocation trigger, and full passes only by the clock.

CPython starts a collection when allocations minus deallocations of tracked objects pass a
threshold. The server's state is mostly replaced, not grown: a report builds ~100 tracked
objects for its host and frees the ~100 of that host's report before, so the count hardly moves
while the young generations fill with every host object built since their last pass. On a soak
of 10,000 agents (docs/reliability.md) a middle-generation pass then had ~1,000,000 live objects
to look at and held the event loop for 0.45 s, once or twice a minute. So a young pass also runs
every YOUNG_SECONDS: it looks at what half a second built (~15 ms at 500 reports/s; bench/soak.py
--sample shows each pass). The allocation trigger stays on, low (THRESHOLDS), for what grows:
a worker thread that builds millions of objects (a top level reading its sites' trees) is walked
in steps as it allocates, not in one pass at the next tick (0.5 s in review, with the trigger off).
What survives a young pass goes to the old generation, which only the full pass looks at: CPython
never starts one here; the schedule does, every FULL_SECONDS or more, as long as the live objects
take to walk (~0.6 s at 10,000 hosts), at most once per FULL_COST_RATIO times its own duration, so
that a bigger site pays the same share of time. Cyclic garbage that outlived a young pass waits
for the full pass (a review found none after 1,600 mixed requests).

On CPython 3.11 to 3.13, gc.collect(1) collects generations 0 and 1 and moves what survives to 2.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from typing import AsyncIterator, Callable

log = logging.getLogger("infosvc.web")

#: between two young passes (generations 0 and 1)
YOUNG_SECONDS = 0.5
#: CPython's trigger while the app runs: generation 0 after 10,000 more allocations than
#: deallocations, generation 1 at every other such pass, generation 2 never (the schedule's)
THRESHOLDS = (10_000, 1, 2**31 - 1)
#: between two full passes, at least and at most
FULL_SECONDS = 600.0
MAX_FULL_SECONDS = 3600.0
#: a full pass runs at most once per this many times its own duration
FULL_COST_RATIO = 500.0
#: a full pass longer than this is logged
LOGGED_SECONDS = 0.1


class CollectionSchedule:
    """Which pass is due at each tick: a full one when its interval has passed, a young one
    otherwise. `collect` and `clock` are gc.collect and time.monotonic but for tests."""

    def __init__(self, *, full: float = FULL_SECONDS, clock: Callable[[], float] = time.monotonic,
                 collect: Callable[[int], int] = gc.collect) -> None:
        self.full = full
        self.clock = clock
        self.collect = collect
        self._full_at = clock()
        #: until the next full pass, from the last one
        self.full_interval = full
        #: passes made, by generation collected (1: young, 2: full)
        self.passes = {1: 0, 2: 0}

    def tick(self) -> int:
        """Collect what is due; returns the oldest generation collected."""
        now = self.clock()
        if now - self._full_at < self.full_interval:
            self.collect(1)
            self.passes[1] += 1
            return 1
        freed = self.collect(2)
        took = self.clock() - now
        self._full_at = now
        self.full_interval = min(MAX_FULL_SECONDS, max(self.full, FULL_COST_RATIO * took))
        self.passes[2] += 1
        if took > LOGGED_SECONDS:
            log.info("garbage collector: a full pass took %.2f s and freed %d objects; the next in %.0f s",
                     took, freed, self.full_interval)
        return 2


async def collect_on_schedule(schedule: CollectionSchedule, interval: float = YOUNG_SECONDS) -> None:
    while True:
        await asyncio.sleep(interval)
        try:
            schedule.tick()
        except Exception:  # noqa: BLE001 - the schedule must outlive one failed pass
            log.exception("garbage collector: a scheduled pass failed")


#: apps whose schedule runs (tests run several in one process): the thresholds are set by the
#: first and given back by the last
_running = 0
_saved: tuple[int, int, int] | None = None


async def scheduled_collection(schedule: CollectionSchedule | None = None) -> AsyncIterator[None]:
    """For the app's cleanup_ctx: THRESHOLDS and the schedule while the app runs."""
    global _running, _saved
    if _running == 0:
        _saved = gc.get_threshold()
        gc.set_threshold(*THRESHOLDS)
    _running += 1
    task = asyncio.create_task(collect_on_schedule(schedule or CollectionSchedule()))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        _running -= 1
        if _running == 0 and _saved is not None:
            gc.set_threshold(*_saved)
