"""The database file itself: opening it (WAL), the one-server lock, reading it ahead, checking it
for damage, and the errors that say what is wrong with it. Knows no table."""

from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import Final, TypeGuard

import sqlite_utils

log = logging.getLogger("infosvc.store")

BUSY_TIMEOUT_MS: Final = 5000
#: The most problems PRAGMA quick_check is asked for; a refusal quotes the first few.
QUICK_CHECK_PROBLEMS: Final = 10


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
    """The connection to the database at `path`, in WAL mode. A file not there yet is made first,
    the service's alone (0600, whatever the umask): SQLite gives its -wal and -shm the database's
    mode, and they hold what jobs were submitted with (environments, arguments)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    except OSError:
        pass  # there already, or not to be made here: SQLite opens it, or says why it cannot
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

