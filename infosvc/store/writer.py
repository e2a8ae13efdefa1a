"""The group-commit writer: one thread owns the write connection and commits, in one transaction,
every operation waiting when it starts one. It knows no table: an operation is any function of
the connection.

Each caller awaits its operation from the event loop and is answered only after the commit that
holds it, so an acknowledged write survives `kill -9`, and the write rate is not one fsync per
write. Each operation runs in a savepoint of its own, so one that fails (a constraint) does not
sink the others of its group. The writer wakes each event loop once per group, not once per
operation: at thousands of reports a second those wake-ups add up.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import sqlite3
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

log = logging.getLogger("infosvc.store")

Operation = Callable[[sqlite3.Connection], Any]


class WriterStopped(RuntimeError):
    """The writer takes no more work: closed, or its thread has ended."""


@dataclass(slots=True, eq=False)
class _Pending:
    operation: Operation
    loop: asyncio.AbstractEventLoop
    waiter: asyncio.Future[Any]
    #: None while queued; True once the writer has taken it; False once its caller gave up.
    taken: bool | None = field(default=None)


class GroupWriter:
    """The writer thread of one connection. `failure(exc)` turns what an operation or a commit
    raised into what its callers are given (the store names damage this way)."""

    def __init__(self, conn: sqlite3.Connection, failure: Callable[[BaseException, bool], BaseException],
                 name: str = "infosvc-store-writer") -> None:
        self._conn = conn
        self._failure = failure
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        # Taking an operation and its caller giving up on it must not cross: one lock decides which.
        self._claims = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        return not self._closed and self._thread.is_alive()

    def check(self) -> None:
        """WriterStopped if a write now could not be done."""
        if self._closed:
            raise WriterStopped("store is closed")
        if not self._thread.is_alive():  # never expected; refuse rather than queue work nobody does
            raise WriterStopped("store writer has stopped")

    async def write(self, operation: Operation) -> Any:
        """Run `operation(conn)` in the next transaction; returns its result once that has committed.

        A caller cancelled while its operation still waits in the queue (a request cut short) takes
        it back: it will not run. Once taken, it commits or fails with its group whatever the caller
        does, as a report already acknowledged to no one is still a report."""
        self.check()
        loop = asyncio.get_running_loop()
        pending = _Pending(operation, loop, loop.create_future())
        self._queue.put(pending)
        try:
            return await pending.waiter
        except asyncio.CancelledError:
            with self._claims:
                if pending.taken is None:
                    pending.taken = False
            raise

    def close(self, timeout: float = 30) -> None:
        """Finish what is queued, then stop the thread."""
        if not self._closed:
            self._closed = True
            self._queue.put(None)
            self._thread.join(timeout=timeout)

    def _take(self, pending: _Pending) -> bool:
        with self._claims:
            if pending.taken is None:
                pending.taken = True
            return pending.taken

    def _run(self) -> None:
        conn = self._conn
        stop = False
        while not stop:
            first = self._queue.get()
            if first is None:
                break
            batch = [first]
            while True:  # everything already waiting joins this transaction
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            batch = [pending for pending in batch if self._take(pending)]
            if batch:
                self._commit(conn, batch)

    def _commit(self, conn: sqlite3.Connection, batch: list[_Pending]) -> None:
        results: list[tuple[_Pending, Any, BaseException | None]] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
            for pending in batch:
                conn.execute("SAVEPOINT op")
                try:
                    results.append((pending, pending.operation(conn), None))
                    conn.execute("RELEASE op")
                except sqlite3.Error as exc:
                    if not conn.in_transaction or _of_the_file(exc):
                        # SQLite rolled the whole transaction back itself (a full disk, an I/O
                        # error), or the file cannot be written at all (read-only): the group
                        # fails, with that cause rather than a missing savepoint.
                        raise
                    conn.execute("ROLLBACK TO op")
                    conn.execute("RELEASE op")
                    results.append((pending, None, self._failure(exc, False)))
            conn.execute("COMMIT")
        except BaseException as exc:  # noqa: BLE001 - every caller must hear about it
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            failure = self._failure(exc, True)
            results = [(pending, None, failure) for pending in batch]
        try:
            _answer(results)
        except Exception:  # noqa: BLE001 - the writer must outlive any one caller
            log.exception("answering store callers failed")


def _of_the_file(exc: sqlite3.Error) -> bool:
    """Whether `exc` says the file cannot be written whatever the operation: SQLITE_READONLY (a
    file or mount the service may not write) or SQLITE_CANTOPEN (its journal cannot be made)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN)


def _answer(results: list[tuple[_Pending, Any, BaseException | None]]) -> None:
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any, BaseException | None]]] = {}
    for pending, value, error in results:
        by_loop.setdefault(pending.loop, []).append((pending.waiter, value, error))
    for loop, items in by_loop.items():
        try:
            loop.call_soon_threadsafe(_settle, items)
        except RuntimeError:  # the loop has closed: nobody is waiting any more
            pass


def _settle(items: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for waiter, value, error in items:
        if waiter.done():  # its caller was cancelled after the writer took it
            continue
        if error is not None:
            waiter.set_exception(error)
        else:
            waiter.set_result(value)
