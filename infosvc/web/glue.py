"""GET /v1/glue, /v1/glue/hosts and /v1/glue/{kind}/{id}: the GLUE tree, in JSON or XML."""

from __future__ import annotations

from aiohttp import web

from infosvc.model.hostid import canonical
from infosvc.site.errors import NotFound
from infosvc.site.query import HostFilter
from infosvc.web.keys import AGGREGATOR
from infosvc.web.negotiate import JSON, XML, wants_xml

GLUE_KINDS = ("computing-elements", "clusters", "subclusters", "hosts")


async def get_glue(request: web.Request) -> web.Response:
    agg = request.app[AGGREGATOR]
    if wants_xml(request):
        return web.Response(body=agg.glue_xml.tree(), content_type=XML)
    return web.Response(body=agg.glue_json.tree(), content_type=JSON)


async def get_glue_hosts(request: web.Request) -> web.Response:
    agg = request.app[AGGREGATOR]
    hosts = agg.table.rollup.hosts
    selected = [hosts[e.id] for e in HostFilter.parse(request.query.items()).select(agg.table) if e.id in hosts]
    if wants_xml(request):
        return web.Response(body=agg.glue_xml.hosts(selected), content_type=XML)
    return web.Response(body=agg.glue_json.hosts(selected), content_type=JSON)


async def get_glue_entity(request: web.Request) -> web.Response:
    agg = request.app[AGGREGATOR]
    kind, ident = request.match_info["kind"], request.match_info["id"]
    if kind == "hosts":
        ident = canonical(ident)  # as every route addresses a host (infosvc.model.hostid)
    if kind not in GLUE_KINDS:
        raise NotFound(f"no GLUE kind {kind!r}", f"one of {', '.join(GLUE_KINDS)}")
    xml = wants_xml(request)
    body = (agg.glue_xml if xml else agg.glue_json).entity(kind, ident)
    if body is None:
        raise NotFound(f"no {kind[:-1].replace('-', ' ')} {ident!r}")
    return web.Response(body=body, content_type=XML if xml else JSON)
