"""GET /v1/glue, /v1/glue/hosts and /v1/glue/{kind}/{id}: the GLUE tree (infosvc/publish/glue.py).
The id is the rest of the path, slashes included (a CE's UniqueID holds one), as is or as %2F.
The whole tree in a grid format is the documents kept and rendered in turn (web.gridquery.GridAnswers)."""

from __future__ import annotations

import asyncio

from aiohttp import web

from infosvc.model.hostid import canonical
from infosvc.publish.glue import GRID_FORMATS, KINDS, Glue
from infosvc.errors import NotFound
from infosvc.hosts import parse_time
from infosvc.web.errors import HttpError
from infosvc.web.gridquery import GRID_PARAMETERS, glue_format
from infosvc.hosts import HostFilter, QueryError
from infosvc.web.keys import AGGREGATOR, GLUE, GRID_ANSWERS, PAST_VIEWS, WHOLE_TREES, known
from infosvc.web.negotiate import format_of
from infosvc.web.pretty import PRETTY, Joined, filters_of


async def get_glue(request: web.Request) -> web.Response:
    if "at" in request.query:
        if set(request.query) - {"at", "format", PRETTY, *GRID_PARAMETERS}:
            raise QueryError("at", "a past view takes no host filter (only format)")
        return await _glue_at(request, parse_time(request.query["at"], "at"))
    fmt, options = glue_format(request)
    rendering = request.app[GLUE].rendering(fmt, options)
    chosen = HostFilter.parse(filters_of(request, "at", *GRID_PARAMETERS))
    if chosen.empty:
        if fmt in GRID_FORMATS:
            body = await request.app[GRID_ANSWERS].body(request.app[GLUE], fmt, options, known=known(request))
            return web.Response(body=body, content_type=rendering.media_type)
        # assembled in a worker thread from the hosts' cached fragments, and shared by readers at
        # once (web.gridquery.WholeTrees); written in turn (web.pretty.Joined)
        parts = await request.app[WHOLE_TREES].parts(request.app[GLUE], fmt, known=known(request))
        return web.Response(body=Joined(parts, rendering.media_type))
    # The tree of the chosen hosts alone: rolled up afresh (subclusters, totals, CEs of them), off
    # the loop, as a past view is: a site's worth of hosts is work for a thread. It takes its turn
    # with the whole tree's renderings: a filter that chooses every host is the whole tree again,
    # and would otherwise get round their bound.
    agg = request.app[AGGREGATOR]
    entries = await agg.choose(chosen)

    def build() -> list[bytes]:
        return Glue(agg.tree_of(entries)).rendering(fmt, options).tree_parts()

    return web.Response(body=Joined(await request.app[GRID_ANSWERS].filtered.run(build, known=known(request)),
                                    rendering.media_type))


async def _glue_at(request: web.Request, at: float) -> web.Response:
    """The tree as published at `at` (infosvc/hosts/history.py), built off the event loop."""
    # One at a time: each parses a report per host. The rest are told to come back.
    gate = request.app[PAST_VIEWS]
    if gate.locked():
        raise HttpError(503, "a past view of the site is being built", "try again shortly")
    agg = request.app[AGGREGATOR]
    fmt, options = glue_format(request)

    def build() -> list[bytes]:
        return Glue(agg.tree_at(at)).rendering(fmt, options).tree_parts()

    async with gate:
        parts = await asyncio.to_thread(build)
    return web.Response(body=Joined(parts, request.app[GLUE].rendering(fmt, options).media_type))


async def get_glue_hosts(request: web.Request) -> web.Response:
    rendering = request.app[GLUE].formats[format_of(request)]
    agg = request.app[AGGREGATOR]
    hosts = agg.tree.hosts
    selected = [hosts[e.id] for e in await agg.choose(HostFilter.parse(filters_of(request))) if e.id in hosts]
    return web.Response(body=Joined(rendering.host_parts(selected), rendering.media_type))


def entity_asked(request: web.Request) -> tuple[str, str]:
    """The kind and the id of GET /v1/glue/{kind}/{id}; NotFound for a kind there is not."""
    kind, ident = request.match_info["kind"], request.match_info["id"]
    if kind not in KINDS:
        raise NotFound(f"no GLUE kind {kind!r}", f"one of {', '.join(KINDS)}")
    if kind == "hosts":
        ident = canonical(ident)  # as every route addresses a host (infosvc.model.hostid)
    return kind, ident


def entity_answer(kind: str, ident: str, body: bytes | None, media_type: str) -> web.Response:
    if body is None:
        raise NotFound(f"no {kind[:-1].replace('-', ' ')} {ident!r}")
    return web.Response(body=body, content_type=media_type)


async def get_glue_entity(request: web.Request) -> web.Response:
    kind, ident = entity_asked(request)
    fmt = format_of(request)
    rendering = request.app[GLUE].formats[fmt]
    if kind in ("clusters", "subclusters"):  # with their hosts: as the whole tree is
        parts = await request.app[WHOLE_TREES].parts(request.app[GLUE], fmt, kind, ident, known=known(request))
        if not parts:
            raise NotFound(f"no {kind[:-1]} {ident!r}")
        return web.Response(body=Joined(parts, rendering.media_type))
    return entity_answer(kind, ident, rendering.entity(kind, ident), rendering.media_type)
