"""POST /v1/nodes (an agent's report), GET /v1/nodes, GET /v1/nodes/{id} and its history
(docs/api.md)."""

from __future__ import annotations

import asyncio
import json
import time

from aiohttp import web

from infosvc.errors import excerpt
from infosvc.model.hostid import canonical
from infosvc.site.errors import NotFound
from infosvc.site.history import HISTORY_MAX, node_history, parse_time
from infosvc.site.hosts import HostEntry
from infosvc.site.query import HostFilter, QueryError
from infosvc.web.auth import caller_of
from infosvc.web.bodies import read_body
from infosvc.web.errors import HttpError
from infosvc.web.keys import AGGREGATOR, METRICS
from infosvc.web.pretty import filters_of
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
    return web.Response(body=json.dumps({"host": entry.id, "state": entry.state.value}).encode(), content_type=JSON)


def render_nodes(entries: list[HostEntry], xml: bool) -> web.Response:
    if xml:
        body = b"<?xml version='1.0' encoding='UTF-8'?>\n<Nodes>" + b"".join(e.xml() for e in entries) + b"</Nodes>\n"
        return web.Response(body=body, content_type=XML)
    return web.Response(body=b"[" + b",".join(e.json() for e in entries) + b"]", content_type=JSON)


async def get_nodes(request: web.Request) -> web.Response:
    selected = list(HostFilter.parse(filters_of(request)).select(request.app[AGGREGATOR].table))
    return render_nodes(selected, wants_xml(request))


async def get_node(request: web.Request) -> web.Response:
    xml = wants_xml(request)
    entry = request.app[AGGREGATOR].table.get(canonical(request.match_info["id"]))
    if entry is None:
        raise NotFound(f"no node {excerpt(request.match_info['id'])!r}")
    if xml:
        return web.Response(body=b"<?xml version='1.0' encoding='UTF-8'?>\n" + entry.xml() + b"\n", content_type=XML)
    return web.Response(body=entry.json(), content_type=JSON)


#: the query parameters of a host's history
HISTORY_PARAMETERS = ("since", "until", "limit")


async def get_node_history(request: web.Request) -> web.Response:
    """The host's stored reports in [since, until], oldest first; a removed host's too, while its
    history is kept."""
    host = canonical(request.match_info["id"])
    query = request.query
    since = parse_time(query["since"], "since") if "since" in query else float("-inf")
    until = parse_time(query["until"], "until") if "until" in query else float("inf")
    text = query.get("limit", "100")
    if not text.isdigit() or not 1 <= int(text) <= HISTORY_MAX:
        raise QueryError("limit", f"a whole number from 1 to {HISTORY_MAX}")
    agg = request.app[AGGREGATOR]
    # Parsing up to a thousand stored documents is work for a thread, not for the event loop.
    reports = await asyncio.to_thread(node_history, agg.store, host, since, until, int(text))
    if not reports and agg.table.get(host) is None and not await asyncio.to_thread(agg.store.history, host, 1):
        raise NotFound(f"no node {excerpt(request.match_info['id'])!r}", "nor any history of one")
    return web.Response(body=json.dumps({"host": host, "reports": reports}, separators=(",", ":")).encode(),
                        content_type=JSON)
