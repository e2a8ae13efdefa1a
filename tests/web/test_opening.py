"""The server's start: it answers at once while its hosts are read, and holds what needs them
until they are (infosvc/web/opening.py); a clean stop keeps the hosts as a snapshot that the next
start reads instead of every report, and a snapshot that no longer says a host's newest report
(a crash after it, a damaged row) is passed over for that host's documents."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from aiohttp import web

from support.documents import node_document
from support.server import ServerFactory, request
from infosvc.config.site import load_config
from infosvc.hosts import Aggregator, Tokens
from infosvc.web.app import make_app

HOSTS = [f"h{i}.example.org" for i in range(5)]


def published(server) -> dict[str, dict]:  # type: ignore[no-untyped-def]
    """Each host as GET /v1/nodes shows it, without what a restart changes (its life cycle)."""
    return {node["id"]: {k: v for k, v in node.items() if k not in ("life_cycle",)}
            for node in server.get("/v1/nodes").json()}


def test_a_clean_stop_keeps_a_snapshot_the_next_start_reads(serve: ServerFactory) -> None:
    server = serve({}, agents=len(HOSTS))
    tokens = [server.agent_token() for _ in HOSTS]
    for host, token in zip(HOSTS, tokens):
        server.report(host, token, free_memory_mb=1000.0)
    before = published(server)
    server.stop()
    assert server.sql("SELECT count(*) FROM host_snapshot") == [(len(HOSTS),)]
    server.start()
    assert published(server) == before
    assert f"{len(HOSTS)} hosts read ({len(HOSTS)} from the snapshot of the last clean stop)" in server.log.read_text()


def test_a_host_newer_than_the_snapshot_is_read_from_its_report(serve: ServerFactory) -> None:
    server = serve({}, agents=len(HOSTS))
    tokens = [server.agent_token() for _ in HOSTS]
    for host, token in zip(HOSTS, tokens):
        server.report(host, token, free_memory_mb=1000.0)
    server.restart()  # the snapshot: every host at 1000 MB free
    server.report(HOSTS[0], tokens[0], free_memory_mb=42.0)
    server.kill()  # no snapshot this time: the one kept says the older report of HOSTS[0]
    server.start()
    hosts = server.get("/v1/nodes").json()
    free = {n["id"]: next(i["value"] for i in n["available"] if i["kind"] == "Memory") for n in hosts}
    assert free == {HOSTS[0]: 42.0, **{h: 1000.0 for h in HOSTS[1:]}}
    assert f"{len(HOSTS)} hosts read ({len(HOSTS) - 1} from the snapshot" in server.log.read_text()


def test_a_damaged_snapshot_row_is_passed_over(serve: ServerFactory) -> None:
    import sqlite3

    server = serve({}, agents=2)
    for host in HOSTS[:2]:
        server.report(host, server.agent_token())
    before = published(server)
    server.stop()
    with sqlite3.connect(server.db) as conn:
        conn.execute("UPDATE host_snapshot SET node = X'5b312c' WHERE host_id = ?", [HOSTS[0]])  # "[1," cut short
    server.start()
    assert published(server) == before
    text = server.log.read_text()
    assert f"snapshot of {HOSTS[0]} unreadable, its documents read instead" in text
    assert "2 hosts read (1 from the snapshot" in text


class Apps:
    """make_app's apps on one store, served one after the other on an event loop in a thread."""

    def __init__(self, directory: Path) -> None:
        from infosvc.hosts.tokens import new_token

        self.token = new_token()
        (directory / "tokens").write_text(f"agent {self.token}\n")
        (directory / "site.toml").write_text("")
        self.directory = directory
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.runner: web.AppRunner | None = None

    def start(self) -> int:
        async def up() -> tuple[web.AppRunner, int]:
            app = make_app(load_config(self.directory / "site.toml"), db=self.directory / "db.sqlite",
                           tokens=Tokens.load(self.directory / "tokens"))
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            return runner, runner.addresses[0][1]

        self.runner, port = asyncio.run_coroutine_threadsafe(up(), self.loop).result(30)
        return int(port)

    def stop(self) -> None:
        if self.runner is not None:
            asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
            self.runner = None

    def close(self) -> None:
        self.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def test_requests_wait_for_the_hosts_and_healthz_answers_meanwhile(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Reading the hosts held back: /healthz says "starting" at once, the API's description is
    served, a read of the hosts waits and then has every host."""
    apps = Apps(tmp_path)
    release = threading.Event()
    try:
        port = apps.start()  # one host stored by a first server on the same store
        assert request(port, "POST", "/v1/nodes", node_document("early.example.org"), token=apps.token).status == 200
        apps.stop()
        load = Aggregator.load

        def held_load(self: Aggregator) -> int:
            release.wait(30)
            return load(self)

        monkeypatch.setattr(Aggregator, "load", held_load)
        port = apps.start()
        started = time.monotonic()
        health = request(port, "GET", "/healthz")
        assert health.status == 200 and health.json()["status"] == "starting"
        assert request(port, "GET", "/openapi.json").status == 200
        assert time.monotonic() - started < 5
        answers: list = []
        reader = threading.Thread(target=lambda: answers.append(request(port, "GET", "/v1/nodes", timeout=30)))
        reader.start()
        time.sleep(0.5)
        assert not answers  # held while the hosts are read
        release.set()
        reader.join(30)
        (nodes,) = answers
        assert nodes.status == 200 and [n["id"] for n in nodes.json()] == ["early.example.org"]
        assert request(port, "GET", "/healthz").json()["status"] == "ok"
    finally:
        release.set()
        apps.close()


def test_a_start_that_cannot_read_the_hosts_says_so(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    def failing_load(self: Aggregator) -> int:
        raise OSError("disk I/O error")

    monkeypatch.setattr(Aggregator, "load", failing_load)
    apps = Apps(tmp_path)
    try:
        port = apps.start()
        time.sleep(0.2)
        health = request(port, "GET", "/healthz")
        assert health.status == 503 and health.json()["status"] == "failing"
        assert "the start failed: OSError: disk I/O error" in health.json()["error"]
        started = time.monotonic()
        nodes = request(port, "GET", "/v1/nodes", timeout=30)
        assert nodes.status == 503 and "the start failed" in nodes.json()["error"]
        assert time.monotonic() - started < 5  # not held for the opening's wait
    finally:
        apps.close()
