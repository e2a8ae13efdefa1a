"""The worker threads the scheduler plans in (a pass, the host pool it plans on), apart from the
event loop's default pool: that pool also reads the store for job listings, events and histories,
and a review held a job's start 15 s while 24 anonymous listings took every thread of it. Two: a
pass and a pool being built at once."""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

T = TypeVar("T")

_PLANNERS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="infosvc-planner")


async def planned(work: Callable[..., T], *args: Any) -> T:
    """work(*args) in one of the scheduler's own threads, awaited on the event loop."""
    return await asyncio.get_running_loop().run_in_executor(_PLANNERS, functools.partial(work, *args))
