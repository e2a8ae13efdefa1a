"""One server per database file.

Two aggregators on one SQLite file each keep their own memory of the token bindings, so a host
reported through the second is bound there only, and taken over after a restart. The store locks
`DB.lock` (flock) for as long as it is open: a second `infosvc serve` on the file exits 1 with one
line, the first goes on, and a kill -9 leaves nothing held (the kernel drops the lock with the
process). Readers and online backups do not take that lock (tests/product/test_operations.py).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.server import ServerFactory, free_port
from infosvc.store import Report, Store, StoreInUse


def test_a_second_store_on_one_file_is_refused_until_the_first_closes(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    first = Store(path)
    try:
        with pytest.raises(StoreInUse, match=rf"in use by another infosvc \(pid {os.getpid()}\)"):
            Store(path)
        # Reached through another name (a symbolic link), it is the same file.
        (tmp_path / "link.sqlite").symlink_to(path)
        with pytest.raises(StoreInUse):
            Store(tmp_path / "link.sqlite")
        asyncio.run(first.add_report(Report("h1", b"<x/>", 1.0, True)))  # the refusals left it whole
    finally:
        first.close()
    second = Store(path)  # closing released it
    try:
        assert [host.id for host in second.hosts()] == ["h1"]
    finally:
        second.close()


def test_a_second_server_on_one_database_is_refused_and_kill_9_frees_it(serve: ServerFactory) -> None:
    server = serve()
    token = server.agent_token()
    server.report("node001", token)
    assert server.process is not None
    first_pid = server.process.pid

    # Another port, the same file: refused before it listens, in one line and without a traceback.
    second = subprocess.run([sys.executable, "-m", "infosvc", "serve", "--db", str(server.db),
                             "--listen", f"127.0.0.1:{free_port()}", "--tokens", str(server.tokens_file)],
                            capture_output=True, text=True, timeout=30)
    assert second.returncode == 1, second.stderr
    assert f"infosvc: {server.db}: in use by another infosvc (pid {first_pid})" in second.stderr, second.stderr
    assert "Traceback" not in second.stderr

    # The first goes on, its bindings its own.
    server.report("node001", token)
    assert server.sql("SELECT host_id FROM token_bindings") == [("node001",)]

    # kill -9 leaves no lock behind: a new server starts on the file at once.
    server.kill()
    server.start()
    assert server.node_ids() == ["node001"]
    server.report("node001", token)
