"""GET /v1/glue, /v1/glue/hosts and /v1/glue/{kind}/{id}: the GLUE tree (infosvc/publish/glue.py).
The id is the rest of the path, slashes included (a CE's UniqueID holds one), as is or as %2F."""

from __future__ import annotations

from aiohttp import web

from infosvc.model.hostid import canonical
from infosvc.publish.glue import KINDS
from infosvc.site.errors import NotFound
from infosvc.site.query import HostFilter
from infosvc.web.keys import AGGREGATOR, GLUE
from infosvc.web.negotiate import format_of


async def get_glue(request: web.Request) -> web.Response:
    rendering = request.app[GLUE].formats[format_of(request)]
    return web.Response(body=rendering.tree(), content_type=rendering.media_type)


async def get_glue_hosts(request: web.Request) -> web.Response:
    rendering = request.app[GLUE].formats[format_of(request)]
    table = request.app[AGGREGATOR].table
    hosts = table.rollup.hosts
    selected = [hosts[e.id] for e in HostFilter.parse(request.query.items()).select(table) if e.id in hosts]
    return web.Response(body=rendering.hosts(selected), content_type=rendering.media_type)


async def get_glue_entity(request: web.Request) -> web.Response:
    kind, ident = request.match_info["kind"], request.match_info["id"]
    if kind not in KINDS:
        raise NotFound(f"no GLUE kind {kind!r}", f"one of {', '.join(KINDS)}")
    if kind == "hosts":
        ident = canonical(ident)  # as every route addresses a host (infosvc.model.hostid)
    rendering = request.app[GLUE].formats[format_of(request)]
    body = rendering.entity(kind, ident)
    if body is None:
        raise NotFound(f"no {kind[:-1].replace('-', ' ')} {ident!r}")
    return web.Response(body=body, content_type=rendering.media_type)
