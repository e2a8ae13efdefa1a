"""A damaged database file.

A file damaged in the middle used to open fine (the start reads only the hosts table) and then
answer 503 with Retry-After, forever, for every request that touched a bad page: agents retried
for ever and nobody was told. Now the store runs PRAGMA quick_check when it opens and refuses a
damaged file in one line; damage found later (SQLITE_CORRUPT, SQLITE_NOTADB) is a StoreCorrupt,
answered 500 "store damaged" (not retryable), logged once a minute naming the file and what to
do, and GET /healthz says failing.

The damage is real: whole pages of a b-tree overwritten in the file, found with SQLite's dbstat.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from support.documents import node_document

from support.server import ServerFactory, free_port
from infosvc.store import Report, Store, StoreCorrupt

HOSTS = 1000


def host(i: int) -> str:
    return f"node{i:04d}"


def fill(path: Path, hosts: int = HOSTS, reports: int = 2) -> None:
    """A store of `hosts` hosts with `reports` reports each, closed (so all is in the main file)."""
    store = Store(path, history_per_host=reports)
    async def add_all() -> None:
        await asyncio.gather(*(store.add_report(Report(host(i), node_document(host(i), sequence=k), 1000.0 + k, True))
                               for k in range(reports) for i in range(hosts)))

    asyncio.run(add_all())
    store.close()


def pages_of(path: Path, btree: str) -> list[int]:
    """The non-root pages of one table's or index's b-tree."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        return [row[0] for row in conn.execute(
            "SELECT pageno FROM dbstat WHERE name = ? AND path != '/' ORDER BY pageno", [btree])]
    finally:
        conn.close()


def damage(path: Path, pages: list[int]) -> None:
    """Overwrite whole pages of the file with a pattern no b-tree page starts with."""
    assert pages and 1 not in pages  # never the header
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    with open(path, "r+b") as file:
        for page in pages:
            file.seek((page - 1) * page_size)
            file.write(b"\xa5" * page_size)


# --- at open: PRAGMA quick_check -----------------------------------------------------------------

# The history, and the index the writer uses for every report: neither is read at start, so
# without the check the server started and failed later, request after request.
@pytest.mark.parametrize("btree", ["reports", "sqlite_autoindex_hosts_1", "hosts"])
def test_a_file_damaged_in_the_middle_is_refused_at_open(tmp_path: Path, btree: str) -> None:
    path = tmp_path / "s.sqlite"
    fill(path)
    pages = pages_of(path, btree)
    damage(path, [pages[len(pages) // 2]])
    with pytest.raises(StoreCorrupt, match=r"damaged \(PRAGMA quick_check: .*\); restore it from a backup"):
        Store(path)
    # A refused open keeps no lock: trying again says the same, not "in use".
    with pytest.raises(StoreCorrupt):
        Store(path)


def test_a_file_that_is_not_a_database_is_refused_at_open(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    path.write_bytes(b"\xa5" * 8192)
    with pytest.raises(StoreCorrupt, match="file is not a database.*restore it from a backup") as caught:
        Store(path)
    cause = caught.value.__cause__
    assert isinstance(cause, sqlite3.DatabaseError) and cause.sqlite_errorcode == sqlite3.SQLITE_NOTADB


def test_serve_refuses_a_damaged_database_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "infosvc.sqlite"
    fill(db)
    pages = pages_of(db, "reports")
    damage(db, [pages[len(pages) // 2]])
    run = subprocess.run([sys.executable, "-m", "infosvc", "serve", "--db", str(db), "--listen",
                          f"127.0.0.1:{free_port()}"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 1, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.startswith(f"infosvc: {db}: ")]
    assert len(lines) == 1, run.stderr
    assert "PRAGMA quick_check" in lines[0] and "restore it from a backup (docs/operations.md)" in lines[0]
    assert "Traceback" not in run.stderr


# --- while running: SQLITE_CORRUPT ---------------------------------------------------------------

def test_damage_found_by_the_store_while_open_is_store_corrupt(tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "s.sqlite"
    fill(path)
    store = Store(path, history_per_host=2)
    try:
        assert store.writing and store.damage is None
        # Damaged behind its back, after the check: pages the store has not read since it opened.
        damage(path, pages_of(path, "sqlite_autoindex_hosts_1"))
        damage(path, pages_of(path, "reports"))
        with caplog.at_level(logging.ERROR, logger="infosvc.store"):
            for i in range(3):
                with pytest.raises(StoreCorrupt) as caught:
                    asyncio.run(store.add_report(Report(host(i), b"<x/>", 2000.0, True)))
            with pytest.raises(StoreCorrupt):
                store.history(host(500))
        cause = caught.value.__cause__  # the SQLite error is kept, code and all
        assert isinstance(cause, sqlite3.DatabaseError) and cause.sqlite_errorcode & 0xFF == sqlite3.SQLITE_CORRUPT
        # Said once (a minute), naming the file and what to do; not once per request.
        damaged = [r.getMessage() for r in caplog.records if "is damaged" in r.getMessage()]
        assert len(damaged) == 1, damaged
        assert str(path) in damaged[0] and "restore it from a backup" in damaged[0] and "docs/operations.md" in damaged[0]
        assert not store.writing and store.damage is not None  # GET /healthz: failing
    finally:
        store.close()
    with pytest.raises(StoreCorrupt):  # and the next start refuses it
        Store(path)


def test_damage_found_while_serving_is_a_500_not_a_retryable_503(serve: ServerFactory) -> None:
    server = serve(start=False)
    fill(server.db)
    server.start()
    token = server.agent_token()
    # The index every report of a host goes through, damaged while the server runs.
    damage(server.db, pages_of(server.db, "sqlite_autoindex_hosts_1"))
    for _ in range(3):
        reply = server.post_node(node_document(host(500)), token)
        assert reply.is_error(500), (reply.status, reply.body)
        assert reply.json()["error"] == "store damaged" and "retry-after" not in reply.headers
        assert "restore it from a backup" in reply.json()["detail"]
    health = server.get("/healthz")
    assert health.status == 503 and health.json()["status"] == "failing"
    assert "damaged" in health.json()["error"], health.json()  # the reason, not "the writer has stopped"
    assert server.get(f"/v1/nodes/{host(1)}").status == 200  # what is in memory is still served
    server.stop()
    log = server.log.read_text()
    assert log.count(f"infosvc.store: {server.db} is damaged") == 1, log  # once, not per request
    assert "Traceback" not in log
    # Restarted, it refuses the file at once instead of failing request after request.
    with pytest.raises(RuntimeError, match="PRAGMA quick_check"):
        server.start()

