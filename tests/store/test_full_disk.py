"""A full disk (docs/reliability.md, Faults): the store's file system fills up under reports and
submissions. Every write is answered 200/201 (stored) or 503 with Retry-After (nothing stored),
never a 500 or a crash; when space returns the service takes writes again without a restart,
PRAGMA integrity_check finds nothing, and every acknowledged report and job is there, after a
restart too.

Two ways to fill it: a 2 MiB tmpfs mounted under the test's directory (needs root: the real
`infosvc serve` writes to a real full file system), else the in-process server's write connection
limited with PRAGMA max_page_count (SQLite answers SQLITE_FULL, as on a full disk)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from infosvc.web.keys import AGGREGATOR
from support.documents import node_document
from support.server import InProcessServer, Server, ServerFactory, wait_for

SSS_JOB = (b"<Job><Id>j</Id><Executable>/bin/true</Executable><Requested><Processors>1</Processors>"
           b"</Requested></Job>")
#: features make a report ~7 KiB: the disk fills in a few hundred
FEATURES = tuple(f"feature-{i:04d}" for i in range(300))


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs, unmounted at the end (after the servers, which are set up after it)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip()}); the max_page_count test stands in")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(directory: Path, spare: int = 0) -> Path:
    """Fill the file system of `directory`, `spare` bytes left; the filler file is returned."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (65536, 4096, 512, 1):  # big writes, then the last bytes
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
        os.ftruncate(fd, max(0, os.fstat(fd).st_size - spare))
    finally:
        os.close(fd)
    return filler


class Writes:
    """Reports and submissions, recording what was acknowledged and every other answer."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.token = server.agent_token()
        self.reports: list[bytes] = []
        self.jobs: list[str] = []
        self.others: list[tuple[str, int, str]] = []
        self.sequence = 0

    def report(self) -> int:
        self.sequence += 1
        document = node_document("full01", sequence=self.sequence, features=FEATURES)
        reply = self.server.post_node(document, self.token)
        if reply.status == 200:
            self.reports.append(document)
        else:
            self.others.append(("report", reply.status, reply.headers.get("retry-after", "")))
        return reply.status

    def submit(self) -> int:
        reply = self.server.request("POST", "/v1/jobs", SSS_JOB, token=self.server.tokens["submit"])
        if reply.status == 201:
            self.jobs.append(reply.json()["id"])
        else:
            self.others.append(("submit", reply.status, reply.headers.get("retry-after", "")))
        return reply.status

    def until_refused(self, limit: int = 3000) -> None:
        """Write until both a report and a submission were refused."""
        refused = set()
        for _ in range(limit):
            if self.report() == 503:
                refused.add("report")
            if self.submit() == 503:
                refused.add("submit")
            if refused == {"report", "submit"}:
                return
        pytest.fail(f"the disk never filled: {len(self.reports)} reports stored")

    def check_refusals(self) -> None:
        # refused means 503 with Retry-After: nothing stored, try again; never a 500
        assert self.others and all(status == 503 and after for _, status, after in self.others), self.others


def check_store(server: Server, writes: Writes) -> None:
    assert server.sql("PRAGMA integrity_check") == [("ok",)]
    stored = {row[0] for row in server.sql("SELECT document FROM reports WHERE host_id = 'full01'")}
    assert not [d for d in writes.reports if d not in stored], "an acknowledged report is missing"
    assert len(stored) == len(writes.reports)  # no half-written or refused report stored
    stored_jobs = {str(row[0]) for row in server.sql("SELECT id FROM jobs")}
    assert set(writes.jobs) == stored_jobs


def test_a_full_disk_is_503_and_recovers(tmpfs: Path, serve: ServerFactory) -> None:
    server = serve({"store": {"history_per_host": 100000}}, agents=2, start=False)
    server.db = tmpfs / "infosvc.sqlite"  # the log and the config stay on the real disk
    server.start()
    writes = Writes(server)
    for _ in range(5):
        assert writes.report() == 200 and writes.submit() == 201
    filler = fill(tmpfs, spare=256 << 10)  # it fills up under the writes
    stored_before = len(writes.reports)
    writes.until_refused()
    assert len(writes.reports) > stored_before  # some went in before the disk was full
    assert server.process is not None and server.process.poll() is None, "the server died"
    writes.check_refusals()
    assert server.get("/healthz").json()["status"] == "failing"
    assert server.get("/v1/nodes/full01").status == 200  # reads go on
    filler.unlink()  # space returns: writes are taken again, no restart
    wait_for(lambda: writes.report() == 200 and writes.submit() == 201, timeout=30,
             message="writes taken once space returned")
    for _ in range(5):
        assert writes.report() == 200 and writes.submit() == 201
    assert server.get("/healthz").status == 200
    check_store(server, writes)
    server.restart()
    check_store(server, writes)
    newest = server.get("/v1/nodes/full01").json()
    assert next(e["value"] for e in newest["extensions"] if e["name"] == "Sequence") == str(writes.sequence)


def test_a_store_that_refuses_writes_is_503_and_recovers(serve_app: ServerFactory) -> None:
    """Without a mount: SQLite's max_page_count on the write connection, lowered to the file's
    size and raised again, is a full disk as SQLite sees it (SQLITE_FULL)."""
    server: Any = serve_app({"store": {"history_per_host": 100000}}, agents=2)
    assert isinstance(server, InProcessServer)
    store = server._runner.app[AGGREGATOR].store

    def on_writer(pragma: Callable[[sqlite3.Connection], Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(store.write(pragma), server._loop).result(10)

    writes = Writes(server)
    for _ in range(5):
        assert writes.report() == 200 and writes.submit() == 201
    pages = on_writer(lambda conn: conn.execute("PRAGMA page_count").fetchone()[0])
    on_writer(lambda conn: conn.execute(f"PRAGMA max_page_count = {pages + 8}").fetchone())
    writes.until_refused()
    writes.check_refusals()
    # whoever watches /healthz is told, not only the senders: failing, and why
    health = server.get("/healthz")
    assert health.status == 503 and health.json()["status"] == "failing", health.body
    assert "full" in health.json()["error"]
    on_writer(lambda conn: conn.execute("PRAGMA max_page_count = 1073741823").fetchone())
    for _ in range(5):
        assert writes.report() == 200 and writes.submit() == 201
    assert server.get("/healthz").status == 200  # the next write that commits clears it
    check_store(server, writes)
    server.restart()
    check_store(server, writes)
    assert os.path.exists(server.db)


def test_a_full_disk_logs_a_line_per_kind_not_per_refusal(serve_app: ServerFactory,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Every refused write used to write two ERROR lines (the store's, the handler's): a client
    that keeps writing to a full disk would fill the log's disk too. One line per kind per interval,
    as the other floods (refused tokens, accept() failures); the next says how many were left out."""
    import infosvc.web.errors
    from infosvc.loglimit import LogLimiter

    # the handlers' limiter is the process's: fresh, as a server's process starts with one
    monkeypatch.setattr(infosvc.web.errors, "store_refusals", LogLimiter(infosvc.web.errors.log))
    server: Any = serve_app({"store": {"history_per_host": 100000}}, agents=2)
    store = server._runner.app[AGGREGATOR].store

    def on_writer(pragma: Callable[[sqlite3.Connection], Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(store.write(pragma), server._loop).result(10)

    writes = Writes(server)
    assert writes.report() == 200 and writes.submit() == 201
    pages = on_writer(lambda conn: conn.execute("PRAGMA page_count").fetchone()[0])
    on_writer(lambda conn: conn.execute(f"PRAGMA max_page_count = {pages + 8}").fetchone())
    writes.until_refused()
    before = len(writes.others)

    def errors() -> list[str]:  # the store's and the handlers' lines (a scheduling pass may fail too)
        return [line for line in server.log.read_text().splitlines()
                if "store write failed" in line or "store unavailable" in line]

    logged_before = len(errors())
    for _ in range(40):
        assert writes.submit() == 503 and writes.report() == 503
    assert len(writes.others) == before + 80
    assert len(errors()) == logged_before, errors()[-6:]  # every kind was said before this flood began
    assert len([e for e in errors() if "infosvc.store: store write failed" in e]) == 1, errors()
    assert len([e for e in errors() if "in POST /v1/jobs" in e]) == 1, errors()
    # once the interval has passed, the next line of each kind counts those it left out
    monkeypatch.setattr(store.logs, "interval", 0.0)
    monkeypatch.setattr(infosvc.web.errors.store_refusals, "interval", 0.0)
    assert writes.submit() == 503
    last = server.log.read_text().splitlines()[-2:]
    assert any("infosvc.store: store write failed" in line and "more like it" in line for line in last), last
    assert any("in POST /v1/jobs" in line and "more like it" in line for line in last), last
