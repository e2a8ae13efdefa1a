"""A database the service cannot write (restored with the wrong owner, a file system mounted
read-only): refused at the start with what to do; should it become so while the service runs,
every write fails as a group, so that /healthz says "failing". SQLite reading the file in
read-only mode stands in for the file's mode: this suite runs as root, which file modes do not stop."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils

import infosvc.store as store_module
from infosvc.store import Store, StoreError
from infosvc.store.writer import GroupWriter


def _read_only(path: str | Path) -> sqlite_utils.Database:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    return sqlite_utils.Database(conn)


def test_a_database_that_cannot_be_written_is_refused_at_the_start(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # a review: the server started, answered every report 503 "try again later" for ever, and
    # /healthz said ok
    path = tmp_path / "ro.sqlite"
    Store(path).close()
    monkeypatch.setattr(store_module, "connect", _read_only)
    with pytest.raises(StoreError, match="cannot be written"):
        Store(path)


def test_a_write_refused_as_read_only_fails_its_whole_group(tmp_path: Path) -> None:
    path = tmp_path / "ro.sqlite"
    Store(path).close()
    said: list[tuple[BaseException, bool]] = []

    def failure(exc: BaseException, whole_group: bool) -> BaseException:
        said.append((exc, whole_group))
        return exc

    conn = _read_only(path).conn
    writer = GroupWriter(conn, failure)

    async def write() -> Any:
        return await writer.write(lambda c: c.execute("PRAGMA user_version = 99"))

    try:
        with pytest.raises(sqlite3.OperationalError):
            asyncio.run(write())
    finally:
        writer.close()
        conn.close()
    assert said and said[-1][1] is True, said  # the group, not one operation: the store is failing
