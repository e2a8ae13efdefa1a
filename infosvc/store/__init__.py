"""The durable store: SQLite (through sqlite-utils) holding every host's newest report, a bounded
history of reports, admin decisions, which agent token is bound to which host, and the job queue
(`jobs`: every job's newest row and its timestamped transitions).

`Store` opens the file (`file`: the one-server lock, WAL, PRAGMA quick_check, read ahead),
brings its tables up to date (`schema`), and writes through one group-commit writer thread
(`writer`) the operations of `hosts` and `jobs`. Every write is a coroutine that returns once the
transaction holding it has committed: an acknowledged report survives `kill -9`. Reads open a
connection of their own; WAL lets them proceed during writes.

A damaged file is refused when it opens, and damage SQLite finds later (SQLITE_CORRUPT,
SQLITE_NOTADB) leaves the store as StoreCorrupt, never as a plain StoreError or sqlite3 error:
it is not a failure that trying again can mend (docs/operations.md, Backups).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Final, Generator, Iterable, Iterator

import sqlite_utils

from infosvc.loglimit import LogLimiter
from infosvc.sched.jobs import Event, JobRecord
from infosvc.store.file import (
    BUSY_TIMEOUT_MS, StoreCorrupt, StoreError, StoreInUse, connect, is_corruption, lock_database, quick_check,
    read_ahead,
)
from infosvc.store.hosts import (
    HostEvent, HostRecord, PastViewTooLarge, Report, SnapshotRow, drop_binding, read_bindings, read_history,
    read_history_pages, read_host_events, read_hosts, read_reports_at, write_binding, write_flags, write_removal, write_report,
    write_snapshot,
)
from infosvc.store.jobs import (EndedQuery, count_ended, count_events, next_job_id, read_document, read_ended,
                                read_events, read_jobs, read_jobs_by_id)
from infosvc.store.schema import MIGRATIONS, migrate
from infosvc.store.withdrawals import drop_withdrawal, keep_withdrawal, read_withdrawals
from infosvc.store.writer import GroupWriter, Operation, WriterStopped

__all__ = ["BUSY_TIMEOUT_MS", "MIGRATIONS", "HostEvent", "HostRecord", "PastViewTooLarge", "Report", "SnapshotRow",
           "Store", "StoreCorrupt", "StoreError",
           "StoreInUse", "connect", "is_corruption", "lock_database", "migrate", "quick_check", "read_ahead"]

log = logging.getLogger("infosvc.store")

#: Damage found while open is logged at most this often: every request that touches it fails alike.
DAMAGE_LOG_SECONDS: Final = 60.0


def _check_writable(conn: sqlite3.Connection, path: str) -> None:
    """StoreError unless the file can be written: one write, rolled back. A file the service may
    not write (restored with another owner, on a file system mounted read-only) opens and reads;
    every write would then fail, answered as a passing trouble (503, try again) for ever."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            conn.execute(f"PRAGMA user_version = {version}")
        finally:
            conn.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        raise StoreError(f"cannot be written ({exc}): give the user the service runs as ({os.getuid()}) "
                         f"write access to it and to {os.path.dirname(os.path.abspath(path))}") from exc


class Store:
    """The SQLite file of one aggregator. Thread-safe: every write goes through the writer thread,
    awaited from an event loop."""

    def __init__(self, path: str | Path, *, history_per_host: int = 100) -> None:
        if history_per_host < 1:
            raise ValueError("history_per_host must be at least 1")
        self.path = str(path)
        self.history_per_host = history_per_host
        self._lock = lock_database(self.path)
        try:
            self._db = self._open()
        except BaseException:
            os.close(self._lock)
            raise
        #: What SQLite said when it first found the file damaged since it opened, else None.
        self.damage: str | None = None
        #: Why the last group of writes failed (a full disk, say), until a write commits again.
        self.failing: str | None = None
        self._damage_lock = threading.Lock()
        self._damage_logged_at: float | None = None
        self._damage_unlogged = 0
        #: A failed write is one line per kind per interval: a client writing to a full disk at will
        #: would fill the log's disk too.
        self.logs = LogLimiter(log)
        self._writer = GroupWriter(self._db.conn, self._failure)
        self._closed = False

    def _open(self) -> sqlite_utils.Database:
        """The writer's connection, once the file has passed quick_check and been migrated."""
        try:
            db = connect(self.path)
            if os.stat(self.path).st_mode & 0o077:
                log.warning("%s can be read by other users (mode %o): it holds what jobs were submitted with "
                            "(their environments and arguments); chmod 600 it, and its -wal and -shm",
                            self.path, os.stat(self.path).st_mode & 0o777)
            try:
                quick_check(self.path)
                migrate(db)
                _check_writable(db.conn, self.path)
            except BaseException:
                db.conn.close()
                raise
        except sqlite3.DatabaseError as exc:
            if is_corruption(exc):
                raise StoreCorrupt(self.path, str(exc)) from exc
            raise
        return db

    def _failure(self, exc: BaseException, whole_group: bool) -> BaseException:
        """What the writer's callers are given for `exc`: damage as StoreCorrupt; a failed group
        as a StoreError; one failed operation (a constraint) as SQLite said it."""
        if is_corruption(exc):
            return self._damaged(exc)
        if not whole_group:
            return exc
        self.logs.error(f"write failed: {exc}"[:200], "store write failed: %s", exc)
        self.failing = f"writes fail: {exc}"  # until one commits (write)
        failure = StoreError(f"store write failed: {exc}")
        failure.__cause__ = exc
        return failure

    def _damaged(self, exc: sqlite3.DatabaseError) -> StoreCorrupt:
        """The StoreCorrupt for damage found while open (its cause `exc`); logged at ERROR at most
        once every DAMAGE_LOG_SECONDS, naming the file and what to do, with how many went unsaid."""
        now = time.monotonic()
        with self._damage_lock:
            if self.damage is None:
                self.damage = str(exc)
            unsaid: int | None = None
            if self._damage_logged_at is None or now - self._damage_logged_at >= DAMAGE_LOG_SECONDS:
                unsaid, self._damage_unlogged, self._damage_logged_at = self._damage_unlogged, 0, now
            else:
                self._damage_unlogged += 1
        if unsaid is not None:
            log.error("%s is damaged (%s): what touches the damaged pages fails, answered 500; stop the service "
                      "and restore it from a backup (docs/operations.md, Backups)%s", self.path, exc,
                      f" ({unsaid} more failures since the last message)" if unsaid else "")
        error = StoreCorrupt(self.path, str(exc))
        error.__cause__ = exc
        return error

    # --- reading (at start, and for history) ---------------------------------------------

    @contextlib.contextmanager
    def _reader(self) -> Iterator[sqlite3.Connection]:
        """A connection of its own for one read; damage found reading is a StoreCorrupt."""
        try:
            reader = connect(self.path)
            try:
                yield reader.conn
            finally:
                reader.conn.close()
        except sqlite3.DatabaseError as exc:
            if is_corruption(exc):
                raise self._damaged(exc) from exc
            raise

    def hosts(self) -> Iterator[HostRecord]:
        with self._reader() as conn:
            yield from read_hosts(conn)

    def history(self, host_id: str, limit: int = 100, since: float = float("-inf"),
                until: float = float("inf")) -> list[tuple[float, bytes]]:
        """The host's newest `limit` reports received in [since, until], newest first."""
        with self._reader() as conn:
            return read_history(conn, host_id, limit, since, until)

    def history_pages(self, host_id: str, limit: int, since: float = float("-inf"), until: float = float("inf"),
                      before: int | None = None) -> Generator[tuple[int, float, bytes, bytes | None], None, None]:
        """(number, received, document, the whole report a delta builds on) of the host's reports
        in [since, until] numbered below `before`, newest first, at most `limit`, read as they are
        taken (store/hosts.py)."""
        with self._reader() as conn:
            yield from read_history_pages(conn, host_id, limit, since, until, before)

    def host_events(self, host_id: str | None = None, until: float = float("inf")) -> list[HostEvent]:
        with self._reader() as conn:
            return read_host_events(conn, host_id, until)

    def reports_at(self, at: float, limit: int) -> Generator[tuple[str, float, bytes, bytes | None], None, None]:
        """(host, received, document, the whole report a delta builds on) of each host published at
        `at`, read as they are taken; PastViewTooLarge past `limit` hosts (store/hosts.py)."""
        with self._reader() as conn:
            yield from read_reports_at(conn, at, limit)

    def token_bindings(self) -> dict[str, str]:
        """token hash -> host id."""
        with self._reader() as conn:
            return read_bindings(conn)

    def jobs(self, *, ended: bool = True) -> list[JobRecord]:
        """The queue's jobs (with `ended=False`, those Queued or Running), in id order."""
        with self._reader() as conn:
            return list(read_jobs(conn, ended=ended))

    def jobs_by_id(self, ids: Iterable[int]) -> list[JobRecord]:
        """The jobs of these ids the store holds (an ended job no longer in the queue's memory)."""
        with self._reader() as conn:
            return read_jobs_by_id(conn, ids)

    def ended_jobs(self, query: EndedQuery, before: tuple[float, int] | None, limit: int) -> list[JobRecord]:
        """The ended jobs `query` selects, newest ended first, below the cursor `before` (store/jobs.py)."""
        with self._reader() as conn:
            return read_ended(conn, query, before, limit)

    def count_ended(self, query: EndedQuery) -> int:
        with self._reader() as conn:
            return count_ended(conn, query)

    def next_job_id(self) -> int:
        """One above the highest job id stored (pruning always keeps that job's row)."""
        with self._reader() as conn:
            return next_job_id(conn)

    def job_document(self, job_id: int) -> tuple[bytes, str] | None:
        """The document a job was submitted as, and its content type."""
        with self._reader() as conn:
            return read_document(conn, job_id)

    def job_events(self, job_id: int, limit: int = 1000) -> list[Event]:
        with self._reader() as conn:
            return read_events(conn, job_id, limit)

    def count_job_events(self, job_id: int, details: Iterable[str]) -> int:
        """How many of the job's own events have a detail LIKE one of `details` (store/jobs.py)."""
        with self._reader() as conn:
            return count_events(conn, job_id, details)

    def size_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal"):
            try:
                total += Path(self.path + suffix).stat().st_size
            except FileNotFoundError:
                pass
        return total

    # --- writing: one coroutine per operation, answered after its commit ------------------

    @property
    def writing(self) -> bool:
        """Whether writes can be trusted to the store: its writer thread is there and no damage has
        been found in the file since it opened (GET /healthz says so). Writes are still taken
        when damage was found: those that do not touch the damaged pages succeed."""
        return self._writer.alive and self.damage is None

    async def write(self, operation: Operation) -> Any:
        """Run `operation(conn)` inside the next write transaction; returns after it commits."""
        try:
            done = await self._writer.write(operation)
        except WriterStopped as exc:
            raise StoreError(str(exc)) from None
        self.failing = None
        return done

    async def add_report(self, report: Report, *, bind_token: str | None = None) -> int:
        """Store a report; with `bind_token`, also bind that token digest to the host, atomically.
        Its number in the history (a delta's `base`)."""
        return int(await self.write(write_report(report, bind_token, self.history_per_host)))

    async def set_flags(self, host_id: str, *, approved: bool | None = None, paused: bool | None = None,
                        event: HostEvent | None = None) -> bool:
        """Record an admin decision (and keep it as `event`); says whether the host exists."""
        changed: bool = await self.write(write_flags(host_id, approved, paused, event))
        return changed

    async def remove_host(self, event: HostEvent, *, purge: bool = False) -> bool:
        """Remove a host, its history kept or purged; says whether it existed."""
        existed: bool = await self.write(write_removal(event, purge))
        return existed

    async def save_snapshot(self, rows: list[SnapshotRow]) -> None:
        """Keep the hosts as held now (at a clean stop), for the next start to read without
        parsing their documents."""
        await self.write(write_snapshot(rows))

    async def bind_token(self, token_hash: str, host_id: str) -> None:
        await self.write(write_binding(token_hash, host_id))

    async def keep_withdrawal(self, marker: str, account: str, since: float) -> None:
        """A Slurm submission to withdraw once Slurm answers (store/withdrawals.py)."""
        await self.write(keep_withdrawal(marker, account, since))

    async def drop_withdrawal(self, marker: str) -> None:
        await self.write(drop_withdrawal(marker))

    def withdrawals(self) -> list[tuple[str, str, float]]:
        """(marker, account, since) of the Slurm submissions still to withdraw (blocking)."""
        with self._reader() as conn:
            return read_withdrawals(conn)

    async def forget_binding(self, token_hash: str) -> None:
        """Drop a stored token binding (one the tokens file now overrides)."""
        await self.write(drop_binding(token_hash))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._writer.close()
            self._db.conn.close()
            os.close(self._lock)  # after the file is closed: the next server finds it whole
