"""The readable middleware (infosvc/web/pretty.py) and large answers: an answer of parts indented on
request (`?pretty=1`) is joined in the worker thread that indents it, not on the event loop; a
large answer that lacks its final newline gets it without a copy of the answer on the event loop;
large answers are indented one at a time, with a bounded queue (503 past it), each a parse and a
copy of the answer; and none past a bound is indented (400), as parsing it again holds the
interpreter lock, whatever thread parses it: a top level's union of 50,000 hosts in XML, 37 MB,
held /healthz 0.25-0.5 s each time it was asked for with `?pretty=1`."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator

import pytest
from aiohttp import web

from infosvc.web import pretty
from infosvc.web.pretty import Joined, readable
from support.overlap import Overlap
from support.server import InProcessServer, ServerFactory, free_port, request

HOSTS = 160  # GET /v1/nodes of them is past pretty.OFF_LOOP_BYTES


@pytest.fixture(scope="module")
def site(module_serve_app: ServerFactory) -> Iterator[InProcessServer]:
    server = module_serve_app(agents=HOSTS)
    assert isinstance(server, InProcessServer)
    tokens = [server.agent_token() for _ in range(HOSTS)]
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda n: server.report(f"n{n:03d}", tokens[n]), range(HOSTS)))
    yield server


def test_an_answer_of_parts_is_joined_off_the_event_loop_to_indent_it(site: InProcessServer,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    joined_in: list[threading.Thread] = []
    real = Joined.joined

    def recorded(self: Joined) -> bytes:
        joined_in.append(threading.current_thread())
        return real(self)

    monkeypatch.setattr(Joined, "joined", recorded)
    for path in ("/v1/glue?format=xml&pretty=1", "/v1/nodes?pretty=1"):
        joined_in.clear()
        reply = site.get(path)
        assert reply.status == 200 and len(reply.body) > pretty.OFF_LOOP_BYTES and b"\n  " in reply.body
        assert joined_in and site._thread not in joined_in, f"{path}: joined on the event loop"


def test_a_large_answer_gets_its_newline_without_a_copy_of_it() -> None:
    big = b"[" + b"1," * (3 * pretty.SLICE_BYTES) + b"1]"
    written: list[Any] = []

    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=big, content_type="application/json")

    async def prepared(request: web.BaseRequest, response: web.StreamResponse) -> None:
        assert isinstance(response, web.Response)
        written.append(response.body)

    async def serve(port: int) -> bytes:
        app = web.Application(middlewares=[readable])
        app.router.add_get("/", handler)
        app.on_response_prepare.append(prepared)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        try:
            reply = await asyncio.to_thread(request, port, "GET", "/")
            return reply.body
        finally:
            await runner.cleanup()

    assert asyncio.run(serve(free_port())) == big + b"\n"
    payload = written[0]
    held = getattr(payload, "_value", payload)
    assert isinstance(held, list) and any(part is big for part in held), \
        f"the answer was copied to add its newline ({type(payload).__name__})"


def test_large_answers_are_indented_one_at_a_time(site: InProcessServer, monkeypatch: pytest.MonkeyPatch) -> None:
    overlap = Overlap()
    real = pretty._indent

    def slow(body: bytes, xml: bool) -> bytes:
        if len(body) <= pretty.OFF_LOOP_BYTES:  # a refusal, say
            return real(body, xml)
        with overlap.timed():
            return real(body, xml)

    monkeypatch.setattr(pretty, "_indent", slow)
    with ThreadPoolExecutor(16) as pool:
        replies = list(pool.map(lambda _: site.get("/v1/nodes?pretty=1", timeout=60), range(16)))
    statuses = [r.status for r in replies]
    assert overlap.most == 1, f"{overlap.most} large answers indented at once"
    assert set(statuses) == {200, 503} and statuses.count(200) == overlap.calls, statuses
    refused = next(r for r in replies if r.status == 503)
    assert refused.headers["retry-after"] and refused.json()["error"]
    assert site.get("/v1/nodes?pretty=1").status == 200  # once they are done


def test_a_reader_with_a_token_is_indented_its_answer_while_anonymous_readers_fill_the_queue(
        site: InProcessServer, monkeypatch: pytest.MonkeyPatch) -> None:
    overlap = Overlap()
    real = pretty._indent

    def slow(body: bytes, xml: bool) -> bytes:
        if len(body) <= pretty.OFF_LOOP_BYTES:
            return real(body, xml)
        with overlap.timed():
            return real(body, xml)

    monkeypatch.setattr(pretty, "_indent", slow)
    path = "/v1/nodes?pretty=1"
    statuses, (anonymous, known) = overlap.during_flood(site.get, [path] * 16, lambda: (
        site.get(path, timeout=60), site.get(path, token=site.tokens["admin"], timeout=60)))
    assert 503 in statuses and anonymous.status == 503, (statuses, anonymous.status)
    assert known.status == 200 and known.body.count(b"\n") > HOSTS, known.body[:200]
    assert overlap.most == 1, f"{overlap.most} large answers indented at once"


def test_an_answer_past_the_bound_is_not_indented(site: InProcessServer, monkeypatch: pytest.MonkeyPatch) -> None:
    size = len(site.get("/v1/nodes").body)
    monkeypatch.setattr(pretty, "PRETTY_MAX_BYTES", size - 1, raising=False)  # a bound this site's host list passes
    reply = site.get("/v1/nodes?pretty=1")
    assert reply.status == 400 and reply.json()["detail"]["parameter"] == "pretty", reply.body[:300]
    assert f"{size:,} bytes".encode() in reply.body and reply.body.endswith(b"\n")
    assert site.get("/v1/nodes").status == 200  # asked without, it is answered
    monkeypatch.setattr(pretty, "PRETTY_MAX_BYTES", size)
    assert site.get("/v1/nodes?pretty=1").status == 200
