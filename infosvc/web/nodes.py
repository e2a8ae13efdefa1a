"""POST /v1/nodes (an agent's report), GET /v1/nodes, GET /v1/nodes/{id} and its history
(docs/api.md). With Slurm read (docs/slurm.md), the nodes no agent reports are listed and served
too, after the agents' hosts, as SSS Nodes made from Slurm's facts at each read."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Callable
from urllib.parse import quote, urlencode

from aiohttp import web

from infosvc.errors import excerpt
from infosvc.model.hostid import canonical
from infosvc.errors import NotFound
from infosvc.hosts import HISTORY_MAX, Aggregator, parse_time
from infosvc.hosts import HostEntry
from infosvc.hosts import HostFilter, QueryError
from infosvc.web.auth import caller_of
from infosvc.web.bodies import read_body
from infosvc.web.errors import HttpError
from infosvc.web.keys import AGGREGATOR, HISTORY_WORKERS, METRICS
from infosvc.web.pretty import Joined, filters_of
from infosvc.web.negotiate import JSON, XML, wants_xml


async def post_node(request: web.Request) -> web.Response:
    started = time.perf_counter()
    agg = request.app[AGGREGATOR]
    caller = caller_of(request)
    assert caller is not None  # the route's access is AGENT
    if agg.pending >= agg.config.service.max_pending_reports:
        # Shed before reading the body: a report queued behind this many (each being read, waiting
        # for the event loop to parse it, or for the store) would wait longer than its agent should,
        # and the queue would grow without bound. 503 says nothing was stored; the agent keeps the
        # sample and tries again after Retry-After.
        agg.count_refused("overloaded")
        raise HttpError(503, "too many reports under way",
                        f"{agg.pending} reports are being taken; nothing was stored, try again after Retry-After")
    agg.pending += 1
    try:
        body = await read_body(request, agg.config.service, agg.count_refused)
        entry = await agg.ingest(caller.key, body)
    finally:
        agg.pending -= 1
    request.app[METRICS].ingest_seconds.observe(time.perf_counter() - started)
    answer = {"host": entry.id, "state": entry.state.value}
    if (base := entry.base_sample) is not None:
        answer["base"] = base  # the sample this host's delta reports may build on
    return web.Response(body=json.dumps(answer).encode(), content_type=JSON)


def render_nodes(entries: list[HostEntry], xml: bool) -> web.Response:
    """The hosts' cached renderings, joined only as they are written (web.pretty.Joined)."""
    if xml:
        parts = [b"<?xml version='1.0' encoding='UTF-8'?>\n<Nodes>", *(e.xml() for e in entries), b"</Nodes>\n"]
        return web.Response(body=Joined(parts, XML))
    parts = [b"["]
    for entry in entries:
        parts += (entry.json(), b",")
    parts[-1] = b"]\n" if entries else b"[]\n"
    return web.Response(body=Joined(parts, JSON))


async def get_nodes(request: web.Request) -> web.Response:
    return render_nodes(await request.app[AGGREGATOR].choose(HostFilter.parse(filters_of(request))), wants_xml(request))


async def get_node(request: web.Request) -> web.Response:
    xml = wants_xml(request)
    agg = request.app[AGGREGATOR]
    host = canonical(request.match_info["id"])
    entry = agg.table.get(host) or agg.slurm_nodes().get(host)
    if entry is None:
        raise NotFound(f"no node {excerpt(request.match_info['id'])!r}")
    if xml:
        return web.Response(body=b"<?xml version='1.0' encoding='UTF-8'?>\n" + entry.xml() + b"\n", content_type=XML)
    return web.Response(body=entry.json(), content_type=JSON)


#: the query parameters of a host's history
HISTORY_PARAMETERS = ("since", "until", "limit", "before")
#: the reports of one history answer stop once their JSON passes this (past its first report):
#: its reader's memory and time, and the server's, are bounded whatever the reports hold
HISTORY_PAGE_BYTES = 4 << 20
#: history answers built at once, each in a worker thread; the rest wait their turn. Building one
#: holds the GIL most of the time (parsing, JSON): more at once would take it from the event loop.
HISTORY_THREADS = 1


def history_page(agg: Aggregator, host: str, since: float, until: float, limit: int, before: int | None,
                 next_link: Callable[[int], str]) -> tuple[list[bytes], bool]:
    """The answer of GET /v1/nodes/{id}/history as parts to write in turn (web.pretty.Joined: one
    per report, never joined), and whether it holds any report. Built in a worker thread: parsing
    a page of stored documents and writing its JSON is work for a thread, not for the event loop."""
    parts: list[bytes] = []
    size = 0
    more_before: int | None = None
    oldest: int | None = None
    reports = agg.node_history(host, since, until, limit + 1, before)
    try:
        for report in reports:
            if len(parts) == limit:  # one more than the limit: there is a next page
                more_before = oldest
                break
            part = json.dumps({"reported_at": report.reported_at, "node": report.node},
                              separators=(",", ":")).encode()
            if parts and size + len(part) > HISTORY_PAGE_BYTES:
                more_before = oldest
                break
            parts.append(part)
            size += len(part)
            oldest = report.seq
    finally:
        reports.close()  # the store's reader, closed now rather than when collected
    parts.reverse()  # oldest first
    following = b"null" if more_before is None else json.dumps(next_link(more_before)).encode()
    answer = [b'{"host":' + json.dumps(host).encode() + b',"reports":[']
    for part in parts:
        answer += (part, b",")
    if parts:
        answer.pop()
    answer.append(b'],"next":' + following + b"}\n")
    return answer, bool(parts)


async def get_node_history(request: web.Request) -> web.Response:
    """One page of the host's stored reports in [since, until], the newest `limit` (below the
    cursor `before`), oldest first; a removed host's too, while its history is kept."""
    host = canonical(request.match_info["id"])
    query = request.query
    since = parse_time(query["since"], "since") if "since" in query else float("-inf")
    until = parse_time(query["until"], "until") if "until" in query else float("inf")
    text = query.get("limit", "100")
    if not (text.isascii() and text.isdigit() and len(text) <= 4) or not 1 <= int(text) <= HISTORY_MAX:
        raise QueryError("limit", f"a whole number from 1 to {HISTORY_MAX}")
    cursor = query.get("before")
    # ASCII digits, and few: int() refuses (ValueError, a 500) digits of other scripts and past 4,300
    if cursor is not None and not (cursor.isascii() and cursor.isdigit() and len(cursor) <= 19
                                   and 0 < int(cursor) < 1 << 63):
        raise QueryError("before", "the cursor a history answer gave as its `next` page")
    before = int(cursor) if cursor is not None else None
    kept = [(key, value) for key, value in query.items() if key != "before"]

    def next_link(seq: int) -> str:
        return f"/v1/nodes/{quote(host, safe='')}/history?{urlencode([*kept, ('before', str(seq))])}"

    agg = request.app[AGGREGATOR]
    async with request.app[HISTORY_WORKERS]:
        parts, found = await asyncio.to_thread(history_page, agg, host, since, until, int(text), before,
                                               next_link)
    if not found and not await asyncio.to_thread(agg.ever_reported, host):
        raise NotFound(f"no node {excerpt(request.match_info['id'])!r}", "nor any history of one")
    return web.Response(body=Joined(parts, JSON))
