"""Big work for worker threads (rendering or indenting an answer, reading a listing) taken in
turns, one at a time, with a bounded queue and a 503 past it (`Turns`): threads at once are what
hold the event loop, since each holds the interpreter lock for its stretches of work."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, AsyncIterator, Callable, TypeVar

from infosvc.web.errors import HttpError

T = TypeVar("T")


class Turns:
    """Big work for worker threads (an answer to render or indent) done one at a time, with at most
    `waiting` more waiting for their turn; past that a refusal (503, Retry-After) before any work.
    Work asked with a token of the roles the caller names (`known`: web/keys.py) has places of
    its own, as many: other readers who fill theirs refuse no one with such a token (a site BDII's
    provider reads with a read token), and the turns are still one at a time, in the order asked.
    Each piece runs in a worker thread of its own, and threads at once are what hold the event
    loop: eight renderings of a 17.6 MB LDIF at once held /healthz 0.9-1.2 s, one 40 ms. A turn
    lasts until its thread is done, whoever still waits for it: a reader that hangs up frees no
    turn while its work still runs."""

    def __init__(self, busy: str, waiting: int) -> None:
        #: the refusal's message
        self.busy = busy
        self.waiting = waiting
        self._turn = asyncio.Lock()
        #: the work under way and waiting, anonymous (False) and asked with a valid token (True)
        self._taken = {False: 0, True: 0}

    def start(self, prepare: Callable[[], Callable[[], T]], *, known: bool = False) -> asyncio.Task[T]:
        """The work's task: `prepare()` called on the event loop once its turn comes, and what it
        returns run in a worker thread. Await it through asyncio.shield: it is not the reader's
        to cancel. HttpError 503 when the queue of its kind (`known`: asked with a valid token) is full."""
        self._admit(known)
        task = asyncio.ensure_future(self._in_turn(prepare))
        task.add_done_callback(_seen)
        # the place is given back when the task is done, however: one cancelled before its first
        # step never runs a `finally` of its own
        task.add_done_callback(lambda _: self._release(known))
        return task

    async def run(self, work: Callable[[], T], *, known: bool = False) -> T:
        """`work` run in a worker thread in its turn; HttpError 503 when the queue is full."""
        return await asyncio.shield(self.start(lambda: work, known=known))

    @contextlib.asynccontextmanager
    async def taken(self, *, known: bool = False) -> AsyncIterator[None]:
        """A turn for work the caller does itself, in slices on the event loop and in worker threads
        as it likes, until the block ends; HttpError 503 when the queue is full."""
        self._admit(known)
        try:
            async with self._turn:
                yield
        finally:
            self._taken[known] -= 1

    def _admit(self, known: bool) -> None:
        if self._taken[known] > self.waiting:
            raise HttpError(503, self.busy, "try again after Retry-After")
        self._taken[known] += 1

    def _release(self, known: bool) -> None:
        self._taken[known] -= 1

    async def _in_turn(self, prepare: Callable[[], Callable[[], T]]) -> T:
        async with self._turn:
            return await asyncio.to_thread(prepare())


def _seen(task: asyncio.Task[Any]) -> None:
    """Its failure is its readers' (each awaits it): not also "never retrieved" when none is left."""
    if not task.cancelled():
        task.exception()
