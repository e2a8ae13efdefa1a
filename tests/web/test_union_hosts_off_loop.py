"""A top level's routes over the union's hosts (docs/grid.md, Federation), on the real app on
loopback over an upstream of a few thousand hosts: GET /v1/glue/hosts (JSON, XML, host filters),
GET /v1/glue with host filters, and a cluster or subcluster of the union are chosen and rendered
in a worker thread, never on the event loop, one at a time, with a bounded queue (503 past it).
Before, /v1/glue/hosts rendered every host of the union on the event loop at its first read after
each pull (the renderings' cache is cold then): 50,000 hosts held /healthz 0.45 s in JSON, 0.33 s
in XML.

Where a host is rendered and filtered is recorded by wrapping the codecs' host renderings and the
top level's host filter."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from infosvc.codec.glue_json import JsonDocuments
from infosvc.codec.glue_xml import XmlDocuments
from infosvc.web import federation as web_federation
from support.overlap import Overlap
from support.server import InProcessServer, ServerFactory, free_port, wait_for
from support.upstream import serve_upstream

HOSTS = 3000


class Threads:
    """Which threads called what."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, threading.Thread]] = []
        self.loop: threading.Thread | None = None
        self._lock = threading.Lock()

    def wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.calls.append((name, threading.current_thread()))
            return function(*args, **kwargs)
        return recorded

    def clear(self) -> None:
        with self._lock:
            self.calls.clear()

    def count(self, name: str) -> tuple[int, int]:
        """(calls of `name` on the event loop, calls of it anywhere)."""
        with self._lock:
            found = [thread for called, thread in self.calls if called == name]
        return sum(thread is self.loop for thread in found), len(found)


@pytest.fixture(scope="module")
def top(module_serve_app: ServerFactory, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    port = free_port()
    upstream = serve_upstream(tmp_path_factory.mktemp("upstream"), HOSTS, port)
    try:
        server = module_serve_app(start=False)
        server.config_file.write_text("\n".join([
            "[federation]", "interval_seconds = 3600.0", "timeout_seconds = 30.0",
            "[[federation.upstreams]]", f'url = "http://127.0.0.1:{port}"', 'name = "big"']) + "\n")
        server.start()
        assert isinstance(server, InProcessServer)
        wait_for(lambda: len(server.get("/v1/glue", timeout=30).json()["hosts"]) == HOSTS, timeout=60,
                 interval=0.2, message=f"the union of {HOSTS} hosts")
        yield server
    finally:
        upstream.terminate()
        upstream.wait(timeout=10)


@pytest.fixture
def threads(top: InProcessServer, monkeypatch: pytest.MonkeyPatch) -> Threads:
    found = Threads()
    found.loop = top._thread
    for kind in (JsonDocuments, XmlDocuments):
        monkeypatch.setattr(kind, "host", found.wrap("host", kind.host))
    monkeypatch.setattr(web_federation, "_matches", found.wrap("filter", web_federation._matches))
    return found


def test_a_cluster_of_the_union_is_rendered_off_the_event_loop(top: InProcessServer, threads: Threads) -> None:
    reply = top.get("/v1/glue/clusters/default?format=xml", timeout=30)
    assert reply.status == 200 and reply.body.count(b"<Host>") == HOSTS
    on_loop, rendered = threads.count("host")
    assert rendered >= HOSTS and on_loop == 0, f"{on_loop} of {rendered} hosts rendered on the event loop"
    sub = top.get("/v1/glue").json()["subclusters"][0]["unique_id"]
    reply = top.get(f"/v1/glue/subclusters/{sub}?format=json", timeout=30)
    assert reply.status == 200 and len(reply.json()["hosts"]) == HOSTS
    assert threads.count("host")[0] == 0


def test_host_lists_of_the_union_are_chosen_and_rendered_off_the_event_loop(top: InProcessServer,
                                                                            threads: Threads) -> None:
    reply = top.get("/v1/glue/hosts?format=json&state=Ready", timeout=30)
    assert reply.status == 200 and len(reply.json()["hosts"]) == HOSTS
    on_loop, rendered = threads.count("host")
    assert rendered >= HOSTS and on_loop == 0, f"{on_loop} of {rendered} hosts rendered on the event loop"
    on_loop, filtered = threads.count("filter")
    assert filtered == HOSTS and on_loop == 0, f"{on_loop} of {filtered} hosts filtered on the event loop"
    threads.clear()
    for path in ("/v1/glue/hosts?format=xml", "/v1/glue/hosts?format=json", "/v1/glue?state=Ready",
                 "/v1/glue?format=xml&nodes=h000[100-199]"):
        reply = top.get(path, timeout=30)
        assert reply.status == 200, (path, reply.status, reply.body[:300])
        assert threads.count("host")[0] == 0 and threads.count("filter")[0] == 0, path
    assert reply.body.count(b"<Host>") == 100
    listed = top.get("/v1/glue/hosts?nodes=h000[100-102]").json()["hosts"]
    assert [h["unique_id"] for h in listed] == ["h000100", "h000101", "h000102"]


@pytest.fixture
def overlap(monkeypatch: pytest.MonkeyPatch) -> Overlap:
    """The union's JSON host lists slowed, and counted."""
    found = Overlap()
    real = JsonDocuments.host_parts

    def slow(self: JsonDocuments, fragments: Any) -> list[bytes]:
        with found.timed():
            return real(self, fragments)

    monkeypatch.setattr(JsonDocuments, "host_parts", slow)
    return found


def test_union_renderings_are_one_at_a_time_and_the_queue_is_bounded(top: InProcessServer, overlap: Overlap) -> None:
    with ThreadPoolExecutor(20) as pool:
        replies = list(pool.map(lambda _: top.get("/v1/glue/hosts?format=json&nodes=h000001", timeout=60),
                                range(20)))
    statuses = [r.status for r in replies]
    assert overlap.most == 1, f"{overlap.most} host lists rendered at once"
    assert set(statuses) == {200, 503}, statuses
    assert all(r.headers["retry-after"] for r in replies if r.status == 503)
    assert all(r.json()["hosts"][0]["unique_id"] == "h000001" for r in replies if r.status == 200)


def test_readers_of_the_union_s_whole_host_list_at_once_share_one_rendering(top: InProcessServer,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # a review: 24 plain reads of /v1/glue/hosts at once took 24 turns, and 11 were refused (503),
    # where before the turns all were answered; a union never changes once installed
    renders = [0]
    real = JsonDocuments.host_parts

    def slow(self: JsonDocuments, fragments: Any) -> list[bytes]:
        renders[0] += 1
        time.sleep(0.3)
        return real(self, fragments)

    monkeypatch.setattr(JsonDocuments, "host_parts", slow)
    with ThreadPoolExecutor(24) as pool:
        replies = list(pool.map(lambda _: top.get("/v1/glue/hosts?format=json", timeout=60), range(24)))
    assert [r.status for r in replies] == [200] * 24
    assert len({r.body for r in replies}) == 1 and len(replies[0].json()["hosts"]) == HOSTS
    assert renders[0] <= 2, f"{renders[0]} renderings of one union's host list"
    again = top.get("/v1/glue/hosts?format=json", timeout=60)
    assert again.body == replies[0].body and renders[0] <= 2  # kept while the union stands


def test_a_filtered_tree_s_sites_are_of_the_union_it_is_made_of(top: InProcessServer,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # a review: the sites' status was read as the request came and the union at its turn, up to
    # eight turns later: a pull between them made an answer of two pulls
    real_status, real_parts = web_federation.site_status, JsonDocuments.host_parts
    called: list[float] = []
    ended: list[float] = []

    def status(federation: Any) -> Any:
        called.append(time.monotonic())
        return real_status(federation)

    def slow(self: JsonDocuments, fragments: Any) -> list[bytes]:
        try:
            time.sleep(1.0)
            return real_parts(self, fragments)
        finally:
            ended.append(time.monotonic())

    monkeypatch.setattr(web_federation, "site_status", status)
    monkeypatch.setattr(JsonDocuments, "host_parts", slow)
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(top.get, "/v1/glue/hosts?format=json&nodes=h000001", timeout=60)
        time.sleep(0.3)  # the host list holds the turn
        second = pool.submit(top.get, "/v1/glue?format=json&state=Ready", timeout=60)
        assert first.result().status == 200 and second.result().status == 200
    assert called and ended and called[0] >= ended[0], "the sites were read before the union's turn"
    assert second.result().json()["sites"]


def test_a_reader_with_a_token_is_answered_while_anonymous_readers_fill_the_union_s_queue(
        top: InProcessServer, overlap: Overlap) -> None:
    # as a site's grid documents: anonymous readers who fill the queue refuse no one with a token
    path = "/v1/glue/hosts?format=json&nodes=h000100"
    statuses, (anonymous, known) = overlap.during_flood(
        top.get, [f"/v1/glue/hosts?format=json&nodes=h000{n:03d}" for n in range(20)],
        lambda: (top.get(path, timeout=60), top.get(path, token=top.tokens["admin"], timeout=60)))
    assert 503 in statuses and anonymous.status == 503, (statuses, anonymous.status)
    assert known.status == 200, known.body[:200]
    assert [h["unique_id"] for h in known.json()["hosts"]] == ["h000100"]
    assert overlap.most == 1, f"{overlap.most} host lists rendered at once"


def test_a_reader_with_a_token_joining_at_the_moment_an_anonymous_one_is_refused_is_not() -> None:
    # a review: the union's shared rendering was admitted at its task's first step, after its
    # reader let the loop go: a reader with a token arriving meanwhile joined it, and was handed
    # the anonymous places' refusal though its own were empty
    import asyncio
    import types
    from collections import OrderedDict

    from infosvc.web.errors import HttpError
    from infosvc.web.federation import UnionViews
    from infosvc.web.turns import Turns

    async def run() -> tuple[int, int]:
        views = object.__new__(UnionViews)
        views.federation = types.SimpleNamespace(union=object())
        views._json, views._xml = types.SimpleNamespace(fixed=None), types.SimpleNamespace(fixed=None)
        views._renderings = {"json": types.SimpleNamespace(source=None)}
        views.turns = Turns("busy", 1)
        views._kept, views._flights = OrderedDict(), {}
        blockers = [views.turns.start(lambda: (lambda: time.sleep(0.2))) for _ in range(2)]  # the anonymous places

        async def read(known: bool) -> int:
            try:
                await views.shared(("hosts", "json"), "json", lambda rendering, union: b"x", known=known)
                return 200
            except HttpError as exc:
                return exc.status

        anonymous, with_token = await asyncio.gather(read(False), read(True))
        await asyncio.gather(*blockers)
        return anonymous, with_token

    assert asyncio.run(run()) == (503, 200)
