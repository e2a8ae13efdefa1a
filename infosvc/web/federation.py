"""A top level's app (infosvc/federation/, docs/grid.md): `federate(app)` makes the app's GLUE the
union of its upstream sites and its own hosts, pulls the upstreams for the app's life, and serves
the routes whose answers differ at a top level: GET /v1/glue with host filters, /v1/glue/hosts
(over the union's hosts), /healthz and /metrics (with each upstream's status). The rest of the
route table is the site's own, unchanged: a top level keeps its own store, takes its own hosts'
reports and jobs, and GET /v1/glue without filters and /v1/glue/{kind}/{id} read the union
through the site's handlers (infosvc/web/glue.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from typing import AsyncIterator, Iterable

from aiohttp import web

from infosvc.federation.documents import FederatedJson, KeptXml, Publisher, site_status
from infosvc.federation.pull import Federation
from infosvc.federation.status import exposition
from infosvc.federation.tree import SiteTree
from infosvc.model import glue as model
from infosvc.model.glue import Host, SubCluster
from infosvc.publish.glue import Glue, Rendering
from infosvc.config import LOCAL_SITE
from infosvc.hosts import PARAMETERS, HostFilter, QueryError, nodeset_order
from infosvc.web import glue, meta, prometheus
from infosvc.web.keys import AGGREGATOR, CONFIG, FEDERATION, GLUE
from infosvc.web.negotiate import format_of
from infosvc.web.pretty import Joined, filters_of
from infosvc.web.auth import Handler
from infosvc.web.routes import ROUTES, Route, add_routes

log = logging.getLogger("infosvc.federation")


def _matches(chosen: HostFilter, host: Host) -> bool:
    """The host filters over a GLUE host of the union (the SSS documents stay at the sites)."""
    if chosen.states is not None and host.state not in {s.value for s in chosen.states}:
        return False
    if chosen.clusters is not None and host.cluster not in chosen.clusters:
        return False
    if chosen.min_free_processors is not None and host.free_cpus < chosen.min_free_processors:
        return False
    if chosen.min_free_memory is not None and (host.main_memory.ram_available or 0) < chosen.min_free_memory:
        return False
    if chosen.arch is not None and (host.architecture.platform_type or "").lower() != chosen.arch:
        return False
    if chosen.os is not None and (host.operating_system.name or "").lower() != chosen.os:
        return False
    return chosen.nodes is None or host.unique_id in chosen.nodes or host.name.lower() in chosen.nodes


def _select(request: web.Request) -> list[Host] | None:
    """The union's hosts the query's filters choose (NodeSet order with `nodes`), or None: no filter."""
    # the route's other parameters (format, and the grid formats' options) are no filters
    chosen = HostFilter.parse([(k, v) for k, v in filters_of(request, "at") if k in PARAMETERS])
    if chosen.features:
        raise QueryError("feature", "a top level publishes GLUE, which has no SSS Features: ask the site")
    if chosen.empty:
        return None
    hosts = [h for h in request.app[FEDERATION].hosts.values() if _matches(chosen, h)]
    return sorted(hosts, key=lambda h: nodeset_order(h.unique_id)) if chosen.nodes is not None else hosts


def _part(federation: Federation, hosts: Iterable[Host]) -> SiteTree:
    """The union's tree of these hosts alone: their subclusters with totals over them, the clusters
    that hold them, and the CEs of those clusters."""
    union = federation.union
    subs: dict[str, tuple[SubCluster, list[Host]]] = {}
    for host in hosts:
        sub = union.subcluster_of(host.unique_id)
        if sub is None:
            continue
        if sub.unique_id not in subs:
            subs[sub.unique_id] = (dataclasses.replace(sub, host_count=0, live_hosts=0, total_cpus=0, free_cpus=0,
                                                       ram_available=0, states={}), [])
        part, members = subs[sub.unique_id]
        members.append(host)
        part.host_count += 1
        part.states[host.state] = part.states.get(host.state, 0) + 1
        if host.live:
            part.live_hosts += 1
            part.total_cpus += host.total_cpus
            part.ram_available += host.main_memory.ram_available or 0
        part.free_cpus += host.free_cpus
    cluster_ids = {sub.cluster for sub, _ in subs.values()}
    clusters = [c for c in union.clusters() if c.unique_id in cluster_ids]
    ces: list[model.ComputingElement] = [ce for ce in union.computing_elements() if cluster_ids & set(ce.clusters)]
    return SiteTree(clusters, subs.values(), ces, federation.url)


async def get_glue(request: web.Request) -> web.Response:
    if "at" in request.query:
        raise QueryError("at", "a top level keeps no history of its upstream sites: ask the site")
    hosts = _select(request)
    if hosts is None:
        return await glue.get_glue(request)  # the union, through the site's own handler
    federation, fmt = request.app[FEDERATION], format_of(request)
    if fmt not in ("json", "xml"):
        raise QueryError("format", "a top level filters hosts in json and xml; the grid formats publish the whole union")
    part = _part(federation, hosts)
    sites = site_status(federation)
    documents = FederatedJson(federation, federation.union)  # the union as of now: the thread reads only

    def build() -> list[bytes]:
        if fmt == "json":
            return documents.whole(part, Rendering(part, documents).fragment, sites)
        return Glue(part).formats[fmt].tree_parts()

    return web.Response(body=Joined(await asyncio.to_thread(build), request.app[GLUE].formats[fmt].media_type))


async def get_glue_hosts(request: web.Request) -> web.Response:
    rendering = request.app[GLUE].formats[format_of(request)]
    hosts = _select(request)
    chosen = list(request.app[FEDERATION].hosts.values()) if hosts is None else hosts
    return web.Response(body=Joined(rendering.host_parts(chosen), rendering.media_type))


async def healthz(request: web.Request) -> web.Response:
    """The site's /healthz, with `upstreams`: each upstream's status as /v1/glue's `sites` has it."""
    answer = await meta.healthz(request)
    assert isinstance(answer.body, bytes)
    said = json.loads(answer.body)
    said["upstreams"] = [s for s in site_status(request.app[FEDERATION]) if s["name"] != LOCAL_SITE]
    return web.json_response(said, status=answer.status)


async def get_metrics(request: web.Request) -> web.Response:
    answer = await prometheus.get_metrics(request)
    assert isinstance(answer.body, bytes)
    answer.body = answer.body + exposition(request.app[FEDERATION])
    return answer


#: The site's handlers a top level answers with its own.
_REPLACED: dict[Handler, Handler] = {glue.get_glue: get_glue, glue.get_glue_hosts: get_glue_hosts, meta.healthz: healthz,
             prometheus.get_metrics: get_metrics}


def routes() -> tuple[Route, ...]:
    """The route table of a top level: the site's, with the handlers above in place of the site's."""
    return tuple(dataclasses.replace(r, handler=_REPLACED.get(r.handler, r.handler)) for r in ROUTES)


async def _federation_ctx(app: web.Application) -> AsyncIterator[None]:
    agg, config = app[AGGREGATOR], app[CONFIG]
    federation = app[FEDERATION] = Federation(config.federation, agg.tree,
                                              config.service.information_service_url or None)
    own = app[GLUE]
    if own.warm in agg.on_change:
        agg.on_change.remove(own.warm)  # the union's renderings take the top's own hosts as they change
    # The whole documents are the publisher's, made off the event loop after each change; the
    # renderings below serve them, and render single entities and host lists of the last union.
    publisher = Publisher(federation)
    await publisher.publish()  # the top's own hosts, before the first pull
    union = app[GLUE] = Glue(federation)
    union.json = union.formats["json"] = Rendering(federation, FederatedJson(federation, publisher=publisher))
    union.xml = union.formats["xml"] = Rendering(federation, KeptXml(federation, publisher=publisher))
    agg.on_change.append(federation.local_changed)
    agg.on_remove.append(federation.local_changed)
    agg.on_change.append(union.warm)
    names = ", ".join(f"{s.name} ({s.upstream.url})" for s in federation.sites)
    log.info("federation: a top level over %d sites, pulled every %g s: %s", len(federation.sites),
             config.federation.interval_seconds, names)
    tasks = [asyncio.create_task(federation.run()), asyncio.create_task(publisher.run())]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def federate(app: web.Application) -> None:
    """Make `app` (make_app's, before its routes are added) a top level over config.federation's upstreams."""
    app.cleanup_ctx.append(_federation_ctx)  # after the aggregator's: it reads the top's own roll-up
    add_routes(app, routes())
