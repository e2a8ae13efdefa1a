"""The durable store: SQLite (through sqlite-utils) holding every host's newest report, a bounded
history of reports, admin decisions, and which agent token is bound to which host.

One writer thread owns the write connection. Reports are queued to it and committed in groups:
every report waiting when a transaction starts goes into it, and each caller is answered only
after the commit that holds its report. So an acknowledged report survives `kill -9` of the
server, and the write rate is not one fsync per report. WAL lets readers proceed during writes.

One store, one file: an open Store holds an exclusive lock on `DB.lock` beside the file (see
`lock_database`), so a second server on the same file is refused instead of keeping bindings of
its own that diverge from the first's.

A damaged file is refused when it opens (PRAGMA quick_check), and damage SQLite finds later
(SQLITE_CORRUPT, SQLITE_NOTADB) leaves the store as StoreCorrupt, never as a plain StoreError or
sqlite3 error: it is not a failure that trying again can mend (docs/operations.md, Backups).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import queue
import sqlite3
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Final, Iterator, TypeGuard

import sqlite_utils

log = logging.getLogger("infosvc.store")

BUSY_TIMEOUT_MS: Final = 5000
#: Damage found while open is logged at most this often: every request that touches it fails alike.
DAMAGE_LOG_SECONDS: Final = 60.0
#: The most problems PRAGMA quick_check is asked for; a refusal quotes the first few.
QUICK_CHECK_PROBLEMS: Final = 10


def _migration_1(db: sqlite_utils.Database) -> None:
    db.table("hosts").create({"id": str, "document": bytes, "reported_at": float, "first_seen": float,
                              "approved": int, "paused": int}, pk="id")
    reports = db.table("reports")
    reports.create({"seq": int, "host_id": str, "reported_at": float, "document": bytes}, pk="seq")
    reports.create_index(["host_id", "seq"])
    bindings = db.table("token_bindings")
    bindings.create({"token_hash": str, "host_id": str, "bound_at": float}, pk="token_hash")
    bindings.create_index(["host_id"], unique=True)


def _migration_2(db: sqlite_utils.Database) -> None:
    """Host Ids in their canonical form (infosvc.model.hostid: lower case, no final dot), as every part
    now keys hosts. Where two stored Ids fold to one (`HostA` and `hosta`), the one already
    canonical is kept and the other's row and binding are dropped: its agent is refused until an
    admin rebinds it, rather than two hosts merging silently."""
    fold = "lower(CASE WHEN substr({c}, -1) = '.' THEN substr({c}, 1, length({c}) - 1) ELSE {c} END)"
    conn = db.conn
    for table, column in (("hosts", "id"), ("token_bindings", "host_id")):
        folded = fold.format(c=column)
        conn.execute(f"UPDATE OR IGNORE {table} SET {column} = {folded} WHERE {column} != {folded}")
        conn.execute(f"DELETE FROM {table} WHERE {column} != {folded}")
    folded = fold.format(c="host_id")
    conn.execute(f"UPDATE reports SET host_id = {folded} WHERE host_id != {folded}")


#: Schema migrations, applied in order; the database records how many it has had.
MIGRATIONS: Final[list[Callable[[sqlite_utils.Database], None]]] = [_migration_1, _migration_2]


@dataclass(slots=True)
class HostRecord:
    """One host as stored: its newest report and what the admin decided about it."""

    id: str
    document: bytes
    reported_at: float
    first_seen: float
    approved: bool
    paused: bool


@dataclass(slots=True)
class Report:
    host_id: str
    document: bytes
    reported_at: float
    approved: bool  # the host's approval, should this report create it


class StoreError(RuntimeError):
    pass


class StoreCorrupt(StoreError):
    """The database file is damaged: SQLite said SQLITE_CORRUPT or SQLITE_NOTADB, or PRAGMA
    quick_check found damage. Trying again will not mend it; the file must be restored from a
    backup. SQLite's error, when there was one, is the __cause__."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"damaged ({detail}); restore it from a backup (docs/operations.md)")
        self.path = path
        self.detail = detail


def is_corruption(exc: BaseException) -> TypeGuard[sqlite3.DatabaseError]:
    """Whether `exc` is SQLite saying the file is damaged: SQLITE_CORRUPT (any of its extended
    codes) or SQLITE_NOTADB, by the error's code, not its text."""
    code = getattr(exc, "sqlite_errorcode", None)
    return (isinstance(exc, sqlite3.DatabaseError) and isinstance(code, int)
            and code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB))


class StoreInUse(StoreError):
    """Another open Store, in this process or another, holds the file's lock: one server per file."""


def lock_database(path: str | Path) -> int:
    """Take the exclusive lock of the database at `path`; returns the lock file's descriptor, which
    holds it until closed. StoreInUse, naming the holder's pid, when another holds it.

    The lock is flock(2) on a file of its own, `DB.lock` beside the database's real path (symbolic
    links resolved), not on the database: SQLite's own locks on the database are POSIX locks, which
    a second descriptor of the same file in this process would drop when it closed, and SQLite's
    `locking_mode=EXCLUSIVE` would lock out read-only readers and online backups too. A flock is
    held by an open file description, so a second Store in the same process conflicts as another
    process does; it is not inherited by children (O_CLOEXEC), and the kernel drops it when the
    process dies, kill -9 included, so a restart never finds a stale lock. The file is left in
    place on close: removing it would let two servers lock two different files of one name.
    """
    lock_path = os.path.realpath(path) + ".lock"
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise StoreError(f"cannot open the lock file {lock_path}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        raise StoreInUse(f"in use by another infosvc (pid {holder}); one server per database file") from None
    except OSError as exc:  # a file system without locks: refuse rather than run unguarded
        os.close(fd)
        raise StoreError(f"cannot lock {lock_path}: {exc.strerror}") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def connect(path: str | Path) -> sqlite_utils.Database:
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False,
                           isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")  # the first read of the file: SQLITE_NOTADB here
        # NORMAL in WAL mode: a commit is in the OS's hands before we answer, which survives the
        # process being killed; surviving power loss too would cost an fsync per commit group.
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    except BaseException:
        conn.close()
        raise
    return sqlite_utils.Database(conn)


def available_memory() -> int:
    """The memory the kernel says is available for new work, page cache included (0 if unknown)."""
    try:
        with open("/proc/meminfo", "rb") as meminfo:
            for line in meminfo:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def read_ahead(path: str) -> None:
    """Read the file once, in order, so that it is in the OS page cache, when it fits in half the
    available memory. quick_check visits pages in b-tree order, which on a file written report by
    report is nearly random: after a reboot it took 257 s over a 6 GB store (10,000 hosts, 100
    reports each), where reading it in order first and then checking took 49 s, and 1.5 GB 41 s
    against 6 s (bench/store_check.py). Only a speed-up: any failure is ignored."""
    try:
        if os.stat(path).st_size > available_memory() // 2:
            return
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            chunk = bytearray(1 << 20)
            while os.readv(fd, [chunk]) > 0:
                pass
        finally:
            os.close(fd)
    except OSError:
        pass


def quick_check(path: str) -> None:
    """PRAGMA quick_check of the whole file; StoreCorrupt quoting what it found, if anything.

    It reads every page and checks every b-tree's structure and records (not that indexes match
    their tables: integrity_check does that too, 15-50% slower at 10,000 hosts), so damage in pages
    the start does not read (the history, the indexes) is found now, not by requests later. The
    file is read ahead in order first (`read_ahead`). It runs on a connection of its own, whose
    cache goes with it: the writer's connection starts with nothing read from the file but its
    schema. docs/operations.md gives its time at 10,000 hosts.
    """
    started = time.perf_counter()
    read_ahead(path)
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        found = [str(row[0]).replace("\n", " ") for row in conn.execute(f"PRAGMA quick_check({QUICK_CHECK_PROBLEMS})")]
    except sqlite3.DatabaseError as exc:  # some damage stops the check itself
        if is_corruption(exc):
            raise StoreCorrupt(path, f"PRAGMA quick_check: {exc}") from exc
        raise
    finally:
        conn.close()
    if found != ["ok"]:
        more = f"; ... {len(found) - 3} more" if len(found) > 3 else ""
        raise StoreCorrupt(path, "PRAGMA quick_check: " + "; ".join(found[:3]) + more)
    log.info("PRAGMA quick_check of %s: ok in %.2f s", path, time.perf_counter() - started)


def migrate(db: sqlite_utils.Database) -> int:
    """Bring the schema up to date; returns the schema version."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > len(MIGRATIONS):
        raise StoreError(f"database schema version {version} is newer than this infosvc knows ({len(MIGRATIONS)})")
    for number in range(version, len(MIGRATIONS)):
        with db.conn:
            db.conn.execute("BEGIN IMMEDIATE")
            MIGRATIONS[number](db)
            db.conn.execute(f"PRAGMA user_version={number + 1}")
    return len(MIGRATIONS)


class Store:
    """The SQLite file of one aggregator. Thread-safe: every write goes through the writer thread."""

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
        self._damage_lock = threading.Lock()
        self._damage_logged_at: float | None = None
        self._damage_unlogged = 0
        self._queue: queue.SimpleQueue[tuple[Callable[[sqlite3.Connection], Any], _Waiter] | None] = queue.SimpleQueue()
        self._writer = threading.Thread(target=self._run, name="infosvc-store-writer", daemon=True)
        self._writer.start()
        self._closed = False

    def _open(self) -> sqlite_utils.Database:
        """The writer's connection, once the file has passed quick_check and been migrated."""
        try:
            db = connect(self.path)
            try:
                quick_check(self.path)
                migrate(db)
            except BaseException:
                db.conn.close()
                raise
        except sqlite3.DatabaseError as exc:
            if is_corruption(exc):
                raise StoreCorrupt(self.path, str(exc)) from exc
            raise
        return db

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
    def _reader(self) -> Iterator[sqlite_utils.Database]:
        """A connection of its own for one read; damage found reading is a StoreCorrupt."""
        try:
            reader = connect(self.path)
            try:
                yield reader
            finally:
                reader.conn.close()
        except sqlite3.DatabaseError as exc:
            if is_corruption(exc):
                raise self._damaged(exc) from exc
            raise

    def hosts(self) -> Iterator[HostRecord]:
        with self._reader() as reader:
            for row in reader.execute("SELECT id, document, reported_at, first_seen, approved, paused FROM hosts"):
                yield HostRecord(row[0], row[1], row[2], row[3], bool(row[4]), bool(row[5]))

    def history(self, host_id: str, limit: int = 100) -> list[tuple[float, bytes]]:
        with self._reader() as reader:
            rows = reader.execute(
                "SELECT reported_at, document FROM reports WHERE host_id = ? ORDER BY seq DESC LIMIT ?",
                [host_id, limit]).fetchall()
        return [(row[0], row[1]) for row in rows]

    def token_bindings(self) -> dict[str, str]:
        """token hash -> host id."""
        with self._reader() as reader:
            return dict(reader.execute("SELECT token_hash, host_id FROM token_bindings").fetchall())

    def size_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal"):
            try:
                total += Path(self.path + suffix).stat().st_size
            except FileNotFoundError:
                pass
        return total

    # --- writing ---------------------------------------------------------------------------

    @property
    def writing(self) -> bool:
        """Whether writes can be trusted to the store: its writer thread is there and no damage has
        been found in the file since it opened (GET /healthz says so). Writes are still taken
        when damage was found: those that do not touch the damaged pages succeed."""
        return not self._closed and self._writer.is_alive() and self.damage is None

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("store is closed")
        if not self._writer.is_alive():  # never expected; refuse rather than queue work nobody does
            raise StoreError("store writer has stopped")

    def submit(self, operation: Callable[[sqlite3.Connection], Any]) -> Future[Any]:
        """Run `operation(conn)` inside the next write transaction; the future resolves after commit."""
        self._check_open()
        future: Future[Any] = Future()
        self._queue.put((operation, future))
        return future

    async def commit(self, operation: Callable[[sqlite3.Connection], Any]) -> Any:
        """As submit(), awaited from the event loop: returns once the transaction holding it commits.

        The writer wakes the loop once per commit group, not once per operation as wrapping each
        concurrent Future would: at thousands of reports a second those wake-ups add up.
        """
        self._check_open()
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[Any] = loop.create_future()
        self._queue.put((operation, (loop, waiter)))
        return await waiter

    def add_report(self, report: Report, *, bind_token: str | None = None) -> Future[None]:
        """Store a report; with `bind_token`, also bind that token digest to the host, atomically
        (a claim is kept only with the report that made it)."""
        return self.submit(self._report_operation(report, bind_token))

    async def commit_report(self, report: Report, *, bind_token: str | None = None) -> None:
        """add_report(), awaited from the event loop."""
        await self.commit(self._report_operation(report, bind_token))

    def _report_operation(self, report: Report, bind_token: str | None) -> Callable[[sqlite3.Connection], None]:
        keep = self.history_per_host

        def write(conn: sqlite3.Connection) -> None:
            if bind_token is not None:
                # Several reports in flight may carry the same first claim (Aggregator.ingest): the
                # first to commit makes it. A clash on host_id (another token's claim) still fails.
                conn.execute("INSERT INTO token_bindings (token_hash, host_id, bound_at) VALUES (?, ?, ?) "
                             "ON CONFLICT(token_hash) DO NOTHING", [bind_token, report.host_id, report.reported_at])
            conn.execute(
                "INSERT INTO hosts (id, document, reported_at, first_seen, approved, paused) VALUES (?, ?, ?, ?, ?, 0) "
                "ON CONFLICT(id) DO UPDATE SET document = excluded.document, reported_at = excluded.reported_at",
                [report.host_id, report.document, report.reported_at, report.reported_at, int(report.approved)])
            conn.execute("INSERT INTO reports (host_id, reported_at, document) VALUES (?, ?, ?)",
                         [report.host_id, report.reported_at, report.document])
            # Bounded history: drop this host's reports older than its newest `keep`.
            conn.execute(
                "DELETE FROM reports WHERE host_id = ? AND seq < (SELECT seq FROM reports WHERE host_id = ? "
                "ORDER BY seq DESC LIMIT 1 OFFSET ?)", [report.host_id, report.host_id, keep - 1])

        return write

    def set_flags(self, host_id: str, *, approved: bool | None = None, paused: bool | None = None) -> Future[bool]:
        """Record an admin decision; the future says whether the host exists."""

        def write(conn: sqlite3.Connection) -> bool:
            changed = 0
            if approved is not None:
                changed = conn.execute("UPDATE hosts SET approved = ? WHERE id = ?", [int(approved), host_id]).rowcount
            if paused is not None:
                changed = conn.execute("UPDATE hosts SET paused = ? WHERE id = ?", [int(paused), host_id]).rowcount
            return changed > 0

        return self.submit(write)

    def bind_token(self, token_hash: str, host_id: str) -> Future[None]:
        def write(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO token_bindings (token_hash, host_id, bound_at) VALUES (?, ?, ?)",
                         [token_hash, host_id, time.time()])

        return self.submit(write)

    def forget_binding(self, token_hash: str) -> Future[None]:
        """Drop a stored token binding (one the tokens file now overrides)."""
        def write(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM token_bindings WHERE token_hash = ?", [token_hash])

        return self.submit(write)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._queue.put(None)
            self._writer.join(timeout=30)
            self._db.conn.close()
            os.close(self._lock)  # after the file is closed: the next server finds it whole

    def _run(self) -> None:
        conn = self._db.conn
        stop = False
        while not stop:
            first = self._queue.get()
            if first is None:
                break
            batch = [first]
            # Group commit: everything already waiting joins this transaction.
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            # A caller that cancelled its concurrent Future (an admin request cut short) no longer
            # waits: its operation is dropped, and setting a result on its future would raise
            # and end this thread. Once running, a future can no longer be cancelled.
            batch = [(operation, waiter) for operation, waiter in batch
                     if not isinstance(waiter, Future) or waiter.set_running_or_notify_cancel()]
            if not batch:
                continue
            results: list[tuple[_Waiter, Any, BaseException | None]] = []
            try:
                conn.execute("BEGIN IMMEDIATE")
                for operation, waiter in batch:
                    conn.execute("SAVEPOINT op")
                    try:
                        results.append((waiter, operation(conn), None))
                        conn.execute("RELEASE op")
                    except sqlite3.Error as exc:
                        # One bad operation (a constraint) must not sink the others in its group.
                        failed: BaseException = self._damaged(exc) if is_corruption(exc) else exc
                        conn.execute("ROLLBACK TO op")
                        conn.execute("RELEASE op")
                        results.append((waiter, None, failed))
                conn.execute("COMMIT")
            except BaseException as exc:  # noqa: BLE001 - every waiter must hear about it
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
                if is_corruption(exc):
                    failure: StoreError = self._damaged(exc)
                else:
                    log.error("store write failed: %s", exc)
                    failure = StoreError(f"store write failed: {exc}")
                    failure.__cause__ = exc
                results = [(waiter, None, failure) for _, waiter in batch]
            try:
                _settle_all(results)
            except Exception:  # noqa: BLE001 - the writer must outlive any one caller
                log.exception("answering store callers failed")


_Waiter = Future[Any] | tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


def _settle_all(results: list[tuple[_Waiter, Any, BaseException | None]]) -> None:
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any, BaseException | None]]] = {}
    for waiter, value, error in results:
        if isinstance(waiter, Future):  # running (see Store._run): it cannot have been cancelled
            if error is not None:
                waiter.set_exception(error)
            else:
                waiter.set_result(value)
        else:
            by_loop.setdefault(waiter[0], []).append((waiter[1], value, error))
    for loop, items in by_loop.items():
        try:
            loop.call_soon_threadsafe(_settle_in_loop, items)
        except RuntimeError:  # the loop has closed: nobody is waiting any more
            pass


def _settle_in_loop(items: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for waiter, value, error in items:
        if waiter.done():  # its request was cancelled (the client went away)
            continue
        if error is not None:
            waiter.set_exception(error)
        else:
            waiter.set_result(value)
