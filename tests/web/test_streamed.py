"""The big reads are written in parts, a slice at a time, never one body of the whole answer
(web.pretty.Joined): GET /v1/glue (JSON and XML, the whole tree, a filtered one, a past view),
a host's history, and a top level's union. Each answer is the document it was when it was joined
whole: compact JSON that re-encodes to the same bytes (so no separator is lost or doubled
between parts) or XML that parses, with its newline, its exact Content-Length (GET and HEAD),
and the same document indented with `?pretty=1`."""

from __future__ import annotations

import json
from typing import Any, Iterator

import pytest
from aiohttp import http_writer
from lxml import etree

from infosvc.web import pretty
from support.readings import steady, steady_xml
from support.server import Server, ServerFactory, wait_for

#: each write of the process: (the local port of its connection, its size; -1: an answer built whole)
Writes = list[tuple[int | None, int]]
#: the slice the tests write in (web.pretty.SLICE_BYTES): small, so that small documents are many slices
SLICE = 4096


def port_of(writer: Any) -> int | None:
    """The local port of the connection a writer writes to: a server's own port for its answers."""
    transport = writer.transport
    name = transport.get_extra_info("sockname") if transport is not None else None
    return int(name[1]) if name else None


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> Iterator[Writes]:
    """Every write the servers (and clients) of this process make, in order, as (local port,
    size); size -1 for each answer built whole (a body of bytes past a slice, which the middleware
    writes in slices: InSlices), at its writing. By port, because another test's server left
    running in this process (a site a top level still pulls) writes too."""
    sizes: Writes = []
    write = http_writer.StreamWriter.write
    whole = pretty.InSlices.write_with_length

    async def counted(self: http_writer.StreamWriter, chunk: Any, **kwargs: Any) -> None:
        sizes.append((port_of(self), len(chunk)))
        await write(self, chunk, **kwargs)

    async def built_whole(self: pretty.InSlices, writer: Any, content_length: int | None) -> None:
        sizes.append((port_of(writer), -1))
        await whole(self, writer, content_length)

    monkeypatch.setattr(http_writer.StreamWriter, "write", counted)
    monkeypatch.setattr(pretty.InSlices, "write_with_length", built_whole)
    monkeypatch.setattr(pretty, "SLICE_BYTES", SLICE)
    yield sizes


def check_streamed(server: Server, path: str, writes: Writes) -> bytes:
    """GET `path`: the answer whole and right, in writes each a slice or so; HEAD and ?pretty=1 agree."""
    writes.clear()
    got = server.get(path)
    assert got.status == 200, (path, got.status, got.body[:300])
    body = got.body
    assert int(got.headers["content-length"]) == len(body), path
    mine = [size for port, size in writes if port == server.port]  # this server's answer alone
    assert -1 not in mine, f"{path}: built whole, then written in slices"
    assert len(mine) > 2 and max(mine) < len(body) and max(mine) < 2 * SLICE + 16 * 1024, (path, mine)
    assert body.endswith(b"\n") and not body.endswith(b"\n\n"), path
    pretty = server.get(path + ("&" if "?" in path else "?") + "pretty=1").body
    if got.headers["content-type"].startswith("application/json"):
        document = json.loads(body)
        assert json.dumps(document, separators=(",", ":")).encode() + b"\n" == body, path
        indented = json.loads(pretty)
        if "next" in document and document["next"]:  # the next page's link keeps the query, pretty=1 too
            indented["next"] = indented["next"].replace("&pretty=1", "")
        assert steady(indented) == steady(document) and b"\n  " in pretty, path
    else:
        root = etree.fromstring(body)
        assert body.startswith(b"<?xml") and len(root) > 0, path
        assert b"\n  <" in pretty and steady_xml(pretty, etree.XMLParser(remove_blank_text=True)) == steady_xml(body), path
    head = server.request("HEAD", path)
    assert head.status == 200 and head.body == b"", path
    # the same size: a document of these hosts, whose reports do not change between the two reads
    assert abs(int(head.headers["content-length"]) - len(body)) <= 64, path
    return body


def test_a_hosts_history_is_written_in_slices(serve_app: ServerFactory, writes: Writes) -> None:
    site = serve_app(agents=1)
    token = site.agent_token()
    for n in range(30):
        site.report("hist", token, free_memory_mb=1000 + n)
    history = json.loads(check_streamed(site, "/v1/nodes/hist/history?limit=1000", writes))
    assert len(history["reports"]) == 30 and history["next"] is None
    paged = json.loads(check_streamed(site, "/v1/nodes/hist/history?limit=20", writes))
    assert len(paged["reports"]) == 20 and paged["next"]
    one = site.get("/v1/nodes/hist/history?limit=1").json()
    assert len(one["reports"]) == 1 and one["next"]  # a page of one report: no separator left over


def test_a_sites_glue_is_written_in_slices(serve_app: ServerFactory, writes: Writes) -> None:
    site = serve_app(agents=41)
    for n in range(41):
        site.report(f"h{n:02d}", site.agent_token())
    tree = json.loads(check_streamed(site, "/v1/glue", writes))
    assert len(tree["hosts"]) == 41
    check_streamed(site, "/v1/glue?format=xml", writes)
    chosen = json.loads(check_streamed(site, "/v1/glue?state=Ready", writes))
    assert sorted(h["unique_id"] for h in chosen["hosts"]) == sorted(h["unique_id"] for h in tree["hosts"])
    check_streamed(site, "/v1/glue?state=Ready&format=xml", writes)
    past = json.loads(check_streamed(site, "/v1/glue?at=4102444800", writes))
    assert len(past["hosts"]) == 41


def test_a_top_levels_union_is_written_in_slices(serve_app: ServerFactory, writes: Writes) -> None:
    site = serve_app(agents=40)
    for n in range(40):
        site.report(f"h{n:02d}.example.org", site.agent_token())
    top = serve_app(start=False)
    top.config_file.write_text("\n".join([
        "[federation]", "interval_seconds = 0.3", "timeout_seconds = 5", f"max_body_bytes = {1 << 26}",
        "[[federation.upstreams]]", f'url = "{site.url}"', 'name = "one"']) + "\n")
    top.start()
    wait_for(lambda: len(top.get("/v1/glue").json()["hosts"]) == 40, timeout=20, message="the union of 40 hosts")
    union = json.loads(check_streamed(top, "/v1/glue", writes))
    assert {h["site"] for h in union["hosts"]} == {"one"} and union["sites"][0]["name"] == "one"
    xml = etree.fromstring(check_streamed(top, "/v1/glue?format=xml", writes))
    assert len(xml.findall(".//{*}Host")) == 40
    chosen = json.loads(check_streamed(top, "/v1/glue?state=Ready", writes))
    assert len(chosen["hosts"]) == 40
    check_streamed(top, "/v1/glue?state=Ready&format=xml", writes)
