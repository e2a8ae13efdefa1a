"""Readable answers: every JSON and XML answer ends with a newline, and `?pretty=1` indents it
on every route that answers JSON or XML, refusals included; a value that is neither yes nor no is
a 400 that names it."""

from __future__ import annotations

import json

import pytest
from lxml import etree

from support.readings import steady
from support.server import InProcessServer, ServerFactory


@pytest.fixture
def site(serve_app: ServerFactory) -> InProcessServer:
    server = serve_app(agents=1)
    server.report("h1", server.agent_token())
    return server  # type: ignore[return-value]


@pytest.mark.parametrize("path", ["/v1/nodes", "/v1/nodes/h1", "/v1/glue", "/v1/glue/hosts", "/v1/glue/hosts/h1",
                                  "/v1/jobs", "/v1/prometheus/targets", "/healthz", "/v1/nodes/h1/history",
                                  "/v1/nodes/nobody"])
def test_json_answers_end_with_a_newline_and_indent_on_request(site: InProcessServer, path: str) -> None:
    compact = site.get(path)
    assert compact.body.endswith(b"\n") and not compact.body.endswith(b"\n\n"), path
    pretty = site.get(path + "?pretty=1")
    assert pretty.status == compact.status
    assert pretty.body.endswith(b"}\n") or pretty.body.endswith(b"]\n")
    assert steady(json.loads(pretty.body)) == steady(json.loads(compact.body)) or path in ("/healthz",)
    if compact.body.strip() not in (b"[]", b"{}"):
        assert b"\n  " in pretty.body, path  # indented


@pytest.mark.parametrize("path", ["/v1/nodes?format=xml", "/v1/nodes/h1?format=xml", "/v1/glue?format=xml",
                                  "/v1/glue/hosts/h1?format=xml"])
def test_xml_answers_too(site: InProcessServer, path: str) -> None:
    compact = site.get(path)
    assert compact.status == 200 and compact.body.endswith(b"\n")
    pretty = site.get(path + "&pretty=true")
    assert pretty.body.startswith(b"<?xml") and pretty.body.endswith(b">\n") and b"\n  <" in pretty.body
    canonical = [etree.tostring(etree.fromstring(body, etree.XMLParser(remove_blank_text=True)), method="c14n")
                 for body in (compact.body.split(b"?>", 1)[-1], pretty.body.split(b"?>", 1)[-1])]
    assert canonical[0] == canonical[1]  # the same document


def test_the_value_is_checked_and_other_answers_are_left_alone(site: InProcessServer) -> None:
    refused = site.get("/v1/nodes?pretty=very")
    assert refused.is_error(400) and refused.json()["detail"]["parameter"] == "pretty"
    assert site.get("/v1/nodes?pretty=0").body == site.get("/v1/nodes").body
    assert site.get("/metrics?pretty=1").is_error(400)  # text, not JSON: the route takes no pretty
    match = site.request("POST", "/v1/match?pretty=1", b"<Job><Id>x</Id></Job>",
                         headers={"Content-Type": "application/xml"})
    assert match.status == 200 and b'\n  "matches"' in match.body


def test_a_large_answer_is_written_in_slices_whole_and_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past 1 MiB an answer is written a slice at a time (InSlices): the same bytes, the same
    Content-Length, for GET and HEAD, pretty or not."""
    import asyncio

    from infosvc.web import pretty as middleware

    # its 4.6 MB are past what is indented (test_pretty_off_loop.py): here, how it is written
    monkeypatch.setattr(middleware, "PRETTY_MAX_BYTES", 8 << 20)

    from aiohttp import web
    from aiohttp.test_utils import TestClient, TestServer

    from infosvc.web.pretty import SLICE_BYTES, InSlices, readable

    document = json.dumps([{"id": f"host{n:07d}", "free": n} for n in range(120_000)]).encode() + b"\n"
    assert len(document) > 3 * SLICE_BYTES
    written: list[object] = []

    async def big(request: web.Request) -> web.Response:
        return web.json_response(body=document)

    @web.middleware
    async def look(request: web.Request, handler: object) -> web.StreamResponse:
        response = await handler(request)  # type: ignore[operator]
        written.append(response.body)
        return response

    async def run() -> None:
        app = web.Application(middlewares=[look, readable])
        app.router.add_get("/big", big)
        async with TestClient(TestServer(app)) as client:
            got = await client.get("/big")
            assert got.status == 200 and int(got.headers["Content-Length"]) == len(document)
            assert await got.read() == document
            assert isinstance(written[-1], InSlices)
            head = await client.head("/big")
            assert head.status == 200 and int(head.headers["Content-Length"]) == len(document)
            assert await head.read() == b""
            pretty = await client.get("/big?pretty=1")
            assert json.loads(await pretty.read()) == json.loads(document)

    asyncio.run(run())


def test_an_answer_of_parts_is_written_as_the_joined_bytes_without_joining_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """GET /v1/nodes writes the hosts' cached renderings as they are (Joined): the bytes and the
    Content-Length are those of the parts joined, for GET and HEAD, and `?pretty=1` indents them."""
    import asyncio

    from infosvc.web import pretty as middleware

    # its 4 MB are past what is indented (test_pretty_off_loop.py): here, how it is written
    monkeypatch.setattr(middleware, "PRETTY_MAX_BYTES", 8 << 20)

    from aiohttp import web
    from aiohttp.test_utils import TestClient, TestServer

    from infosvc.web.nodes import render_nodes
    from infosvc.web.pretty import SLICE_BYTES, Joined, readable

    class Entry:
        def __init__(self, n: int) -> None:
            self.document = json.dumps({"id": f"host{n:06d}", "pad": "x" * 300}).encode()

        def json(self) -> bytes:
            return self.document

        def xml(self) -> bytes:
            return b"<Node><Id>" + self.document[8:21] + b"</Id></Node>"

    entries = [Entry(n) for n in range(12_000)]
    expected = b"[" + b",".join(e.json() for e in entries) + b"]\n"  # what render_nodes joined before
    assert len(expected) > 3 * SLICE_BYTES

    async def nodes(request: web.Request) -> web.Response:
        xml = request.query.get("format") == "xml"
        response = render_nodes(entries if request.query.get("none") is None else [], xml)  # type: ignore[arg-type]
        assert isinstance(response.body, Joined)
        return response

    async def run() -> None:
        app = web.Application(middlewares=[readable])
        app.router.add_get("/nodes", nodes)
        async with TestClient(TestServer(app)) as client:
            got = await client.get("/nodes")
            assert got.status == 200 and got.headers["Content-Type"].startswith("application/json")
            assert int(got.headers["Content-Length"]) == len(expected)
            assert await got.read() == expected
            head = await client.head("/nodes")
            assert int(head.headers["Content-Length"]) == len(expected) and await head.read() == b""
            pretty = await client.get("/nodes?pretty=1")
            assert json.loads(await pretty.read()) == json.loads(expected)
            empty = await client.get("/nodes?none=1")
            assert await empty.read() == b"[]\n"
            xml = await client.get("/nodes?format=xml")
            body = await xml.read()
            assert body.startswith(b"<?xml") and body.endswith(b"</Nodes>\n") and body.count(b"<Node>") == 12_000

    asyncio.run(run())


def test_joined_writes_slices_no_larger_than_a_few_parts_past_a_slice() -> None:
    """Joined never builds the whole body: each write is about a slice."""
    import asyncio

    from infosvc.web.pretty import SLICE_BYTES, Joined

    parts = [bytes([65 + n % 26]) * 1000 for n in range(5000)]
    written: list[bytes] = []

    class Writer:
        async def write(self, data: bytes) -> None:
            written.append(bytes(data))

    payload = Joined(parts, "application/json")
    assert payload.size == 5_000_000
    asyncio.run(payload.write(Writer()))  # type: ignore[arg-type]
    assert b"".join(written) == b"".join(parts)
    assert len(written) > 3 and max(map(len, written)) < SLICE_BYTES + 1000
    written.clear()
    asyncio.run(payload.write_with_length(Writer(), 2500))  # type: ignore[arg-type]
    assert b"".join(written) == b"".join(parts)[:2500]


def test_host_lists_are_written_from_their_parts_whole(serve_app: ServerFactory) -> None:
    """GET /v1/nodes and /v1/glue/hosts (JSON and XML) are written from each host's cached
    rendering: every host there, once, in a document whose Content-Length is its size."""
    server = serve_app(agents=30)
    for n in range(30):
        server.report(f"h{n:02d}", server.agent_token())
    for path in ("/v1/nodes", "/v1/glue/hosts", "/v1/nodes?format=xml", "/v1/glue/hosts?format=xml"):
        reply = server.get(path)
        assert reply.status == 200 and int(reply.headers["content-length"]) == len(reply.body), path
        assert reply.body.endswith(b"\n") and not reply.body.endswith(b"\n\n"), path
        if "xml" in path:
            root = etree.fromstring(reply.body)
            assert len(root) == 30, path
        else:
            listed = reply.json()
            assert len(listed if isinstance(listed, list) else listed["hosts"]) == 30, path
    assert server.get("/v1/glue/hosts?state=Unreachable").json() == {"hosts": []}
