"""The big reads are written in parts, a slice at a time, never one body of the whole answer
(web.pretty.Joined): a host's history. Each answer is the document it was when it was joined
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
from support.server import Server, ServerFactory

#: the slice the tests write in (web.pretty.SLICE_BYTES): small, so that small documents are many slices
SLICE = 4096


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The size of every write the servers of this process make, in order; -1 for each answer
    built whole (a body of bytes past a slice, which the middleware writes in slices: InSlices)."""
    sizes: list[int] = []
    write = http_writer.StreamWriter.write
    whole = pretty.InSlices.__init__

    async def counted(self: http_writer.StreamWriter, chunk: Any, **kwargs: Any) -> None:
        sizes.append(len(chunk))
        await write(self, chunk, **kwargs)

    def built_whole(self: pretty.InSlices, value: bytes, content_type: str) -> None:
        sizes.append(-1)
        whole(self, value, content_type)

    monkeypatch.setattr(http_writer.StreamWriter, "write", counted)
    monkeypatch.setattr(pretty.InSlices, "__init__", built_whole)
    monkeypatch.setattr(pretty, "SLICE_BYTES", SLICE)
    yield sizes


def check_streamed(server: Server, path: str, writes: list[int]) -> bytes:
    """GET `path`: the answer whole and right, in writes each a slice or so; HEAD and ?pretty=1 agree."""
    writes.clear()
    got = server.get(path)
    assert got.status == 200, (path, got.status, got.body[:300])
    body = got.body
    assert int(got.headers["content-length"]) == len(body), path
    assert -1 not in writes, f"{path}: built whole, then written in slices"
    assert len(writes) > 2 and max(writes) < len(body) and max(writes) < 2 * SLICE + 16 * 1024, (path, writes)
    assert body.endswith(b"\n") and not body.endswith(b"\n\n"), path
    pretty = server.get(path + ("&" if "?" in path else "?") + "pretty=1").body
    if got.headers["content-type"].startswith("application/json"):
        document = json.loads(body)
        assert json.dumps(document, separators=(",", ":")).encode() + b"\n" == body, path
        indented = json.loads(pretty)
        if "next" in document and document["next"]:  # the next page's link keeps the query, pretty=1 too
            indented["next"] = indented["next"].replace("&pretty=1", "")
        assert indented == document and b"\n  " in pretty, path
    else:
        root = etree.fromstring(body)
        assert body.startswith(b"<?xml") and len(root) > 0, path
        assert b"\n  <" in pretty and etree.tostring(etree.fromstring(pretty.split(b"?>", 1)[1],
                                                     etree.XMLParser(remove_blank_text=True)), method="c14n") \
            == etree.tostring(etree.fromstring(body.split(b"?>", 1)[1]), method="c14n"), path
    head = server.request("HEAD", path)
    assert head.status == 200 and head.body == b"", path
    # the same size: a document of these hosts, whose reports do not change between the two reads
    assert abs(int(head.headers["content-length"]) - len(body)) <= 64, path
    return body


def test_a_hosts_history_is_written_in_slices(serve_app: ServerFactory, writes: list[int]) -> None:
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

