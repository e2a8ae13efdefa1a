"""The database holds what jobs were submitted with (their environments, arguments): its file and
the -wal and -shm beside it are the service's alone, whatever the umask it was started under; an
existing file others can read is said at the start. Real SQLite files."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from pathlib import Path

import pytest

from infosvc.store import Store


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_database_and_its_journal_are_the_services_alone(tmp_path: Path) -> None:
    # a review: under umask 022 (make run) all three were 0644, and another local user read a
    # job's secret environment value from the WAL
    old = os.umask(0o022)
    try:
        store = Store(tmp_path / "new.sqlite")
        try:
            asyncio.run(store.write(lambda conn: conn.execute("CREATE TABLE probe (x)")))
            modes = {name: _mode(tmp_path / name) for name in ("new.sqlite", "new.sqlite-wal", "new.sqlite-shm")}
        finally:
            store.close()
    finally:
        os.umask(old)
    assert modes == {"new.sqlite": 0o600, "new.sqlite-wal": 0o600, "new.sqlite-shm": 0o600}


def test_an_existing_database_others_can_read_is_said(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "old.sqlite"
    Store(path).close()
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="infosvc.store"):
        Store(path).close()
    assert f"{path} can be read by other users" in caplog.text
    caplog.clear()
    path.chmod(0o600)
    with caplog.at_level(logging.WARNING, logger="infosvc.store"):
        Store(path).close()
    assert "can be read by other users" not in caplog.text
