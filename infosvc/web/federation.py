"""A top level's app (infosvc/federation/, docs/grid.md): `federate(app)` makes the app's GLUE the
union of its upstream sites and its own hosts, pulls the upstreams for the app's life, and serves
the routes whose answers differ at a top level: GET /v1/glue with host filters, /v1/glue/hosts
(over the union's hosts), a cluster or subcluster of the union, /healthz and /metrics (with each
upstream's status). The rest of the route table is the site's own, unchanged: a top level keeps
its own store, takes its own hosts' reports and jobs, and GET /v1/glue without filters and the
union's hosts and CEs by id read the union through the site's handlers (infosvc/web/glue.py).

What reads the union's hosts (a host list, the hosts a filter chooses, a cluster or subcluster
with its hosts) is chosen and rendered in a worker thread, one at a time, over the union as it
stands then (`UnionViews`): a union is made anew after each pull, its hosts' renderings
with it, and 50,000 hosts rendered on the event loop at the first read after a pull held it 0.3
to 0.5 s.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections import OrderedDict
from typing import Any, AsyncIterator, Callable, Iterable, TypeVar

from aiohttp import web

from infosvc.federation.documents import FederatedJson, KeptXml, Publisher, site_status
from infosvc.federation.pull import Federation
from infosvc.federation.status import exposition
from infosvc.federation.tree import SiteTree, UnionTree
from infosvc.model import glue as model
from infosvc.model.glue import Host, SubCluster
from infosvc.publish.glue import Glue, Parts, Rendering
from infosvc.config import LOCAL_SITE
from infosvc.hosts import PARAMETERS, HostFilter, QueryError, nodeset_order
from infosvc.web import glue, meta, prometheus
from infosvc.web.keys import AGGREGATOR, CONFIG, FEDERATION, GLUE, UNION_VIEWS, known
from infosvc.web.gridquery import glue_format
from infosvc.web.negotiate import format_of
from infosvc.web.errors import HttpError
from infosvc.web.pretty import Joined, filters_of
from infosvc.web.turns import Turns
from infosvc.web.auth import Handler
from infosvc.web.routes import ROUTES, Route, add_routes

log = logging.getLogger("infosvc.federation")
T = TypeVar("T")
#: host lists, filtered trees and clusters of the union waiting for their turn, past the one under way
UNION_WAITING = 8
#: whole host lists and clusters of the union kept (each format's host list, a few clusters)
UNION_KEPT = 8


class UnionViews:
    """The union's host lists, its parts chosen by host filters, and its clusters and subclusters,
    made in a worker thread, one at a time (`Turns`: a 503 past the queue), each over the union
    installed when its turn comes (a union is never changed once installed: a pull makes a new
    one). Each host's rendering is kept while the union holds that Host, as the publisher keeps
    its own, in renderings only that one thread touches."""

    def __init__(self, federation: Federation) -> None:
        self.federation = federation
        self._json = FederatedJson(federation)
        self._xml = KeptXml(federation)
        self._renderings = {"json": Rendering(federation, self._json), "xml": Rendering(federation, self._xml)}
        self.turns = Turns("the union's hosts are being rendered", UNION_WAITING)
        #: answers of one union by what they are of (`shared`), the least recently read dropped first
        self._kept: OrderedDict[tuple[str, ...], tuple[UnionTree, Any]] = OrderedDict()
        self._flights: dict[tuple[str, ...], tuple[UnionTree, asyncio.Future[Any]]] = {}

    async def build(self, fmt: str, work: Callable[[Rendering, UnionTree], T],
                    before: Callable[[], None] | None = None, *, known: bool = False) -> T:
        """work(the format's rendering, the union installed when its turn comes), in a worker
        thread in its turn (`known`: asked with a valid token, in the places kept for those);
        `before()` on the event loop as the union is taken (what the answer reads of the
        federation besides, of the same moment)."""
        return await asyncio.shield(self._start(fmt, work, before, known))

    def _start(self, fmt: str, work: Callable[[Rendering, UnionTree], T], before: Callable[[], None] | None,
               known: bool) -> asyncio.Task[T]:
        """`build`'s task, admitted (or refused: HttpError 503) now, not at its first step: a reader
        joining it must not be handed a refusal its own places would not have made."""
        rendering = self._renderings[fmt]

        def prepare() -> Callable[[], T]:
            union = self.federation.union
            if before is not None:
                before()

            def run() -> T:
                self._json.fixed = self._xml.fixed = union
                rendering.source = union
                return work(rendering, union)

            return run

        return self.turns.start(prepare, known=known)

    async def shared(self, key: tuple[str, ...], fmt: str, work: Callable[[Rendering, UnionTree], T], *,
                     known: bool = False) -> T:
        """`build`, for an answer that depends on nothing but `key` and the union (a whole host
        list, a cluster): kept while the union installed stands, readers at once sharing one
        rendering; with the queue full, the answer kept of an earlier union rather than a 503.
        Twenty-four plain reads of /v1/glue/hosts at once took twenty-four turns, eleven refused."""
        union = self.federation.union
        kept = self._kept.get(key)
        if kept is not None:
            self._kept.move_to_end(key)
            if kept[0] is union:
                same: T = kept[1]
                return same
        flight = self._flights.get(key)
        if flight is None or flight[0] is not union:
            made: list[UnionTree] = []

            def run(rendering: Rendering, now: UnionTree) -> T:
                made.append(now)
                return work(rendering, now)

            try:
                task = self._start(fmt, run, None, known)
            except HttpError:
                if kept is None:
                    raise
                refused: T = kept[1]  # the queue is full: the answer of an earlier union
                return refused
            flight = (union, task)
            self._flights[key] = flight
            task.add_done_callback(lambda done: self._landed(key, flight, made, done))
        try:
            answer: T = await asyncio.shield(flight[1])
            return answer
        except HttpError:
            if kept is None:
                raise
            earlier: T = kept[1]  # the queue is full: the answer of an earlier union
            return earlier

    def _landed(self, key: tuple[str, ...], flight: tuple[UnionTree, asyncio.Future[Any]],
                made: list[UnionTree], done: asyncio.Future[Any]) -> None:
        if self._flights.get(key) is flight:
            del self._flights[key]
        if done.cancelled() or done.exception() is not None or not made:
            return
        self._kept[key] = (made[0], done.result())
        self._kept.move_to_end(key)
        while len(self._kept) > UNION_KEPT:
            self._kept.popitem(last=False)


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


def _chosen(request: web.Request) -> HostFilter | None:
    """The query's host filters (a 400 for a bad one, here on the loop), or None: no filter."""
    # the route's other parameters (format, and the grid formats' options) are no filters
    chosen = HostFilter.parse([(k, v) for k, v in filters_of(request, "at") if k in PARAMETERS])
    if chosen.features:
        raise QueryError("feature", "a top level publishes GLUE, which has no SSS Features: ask the site")
    return None if chosen.empty else chosen


def _select(union: UnionTree, chosen: HostFilter) -> list[Host]:
    """The union's hosts the filters choose (NodeSet order with `nodes`): each host tested, in a
    worker thread."""
    hosts = [h for h in union.hosts.values() if _matches(chosen, h)]
    return sorted(hosts, key=lambda h: nodeset_order(h.unique_id)) if chosen.nodes is not None else hosts


def _part(union: UnionTree, url: str | None, hosts: Iterable[Host]) -> SiteTree:
    """The union's tree of these hosts alone: their subclusters with totals over them, the clusters
    that hold them, and the CEs of those clusters."""
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
    return SiteTree(clusters, subs.values(), ces, url)


async def get_glue(request: web.Request) -> web.Response:
    if "at" in request.query:
        raise QueryError("at", "a top level keeps no history of its upstream sites: ask the site")
    chosen = _chosen(request)
    if chosen is None:
        fmt, _ = glue_format(request)
        if fmt in ("json", "xml"):  # the publisher's parts, made in its thread after each change
            rendering = request.app[GLUE].formats[fmt]
            return web.Response(body=Joined(rendering.tree_parts(), rendering.media_type))
        return await glue.get_glue(request)  # the grid formats, through the site's own handler
    federation, fmt = request.app[FEDERATION], format_of(request)
    if fmt not in ("json", "xml"):
        raise QueryError("format", "a top level filters hosts in json and xml; the grid formats publish the whole union")
    sites: list[Any] = []  # the sites' status as the union is taken: both of one pull

    def build(_: Rendering, union: UnionTree) -> list[bytes]:
        part = _part(union, federation.url, _select(union, chosen))
        if fmt == "json":
            documents = FederatedJson(federation, union)
            return documents.whole(part, Rendering(part, documents).fragment, sites[0])
        return Glue(part).formats[fmt].tree_parts()

    parts = await request.app[UNION_VIEWS].build(fmt, build, before=lambda: sites.append(site_status(federation)),
                                                 known=known(request))
    return web.Response(body=Joined(parts, request.app[GLUE].formats[fmt].media_type))


async def get_glue_hosts(request: web.Request) -> web.Response:
    fmt = format_of(request)
    chosen = _chosen(request)

    def build(rendering: Rendering, union: UnionTree) -> list[bytes]:
        hosts = list(union.hosts.values()) if chosen is None else _select(union, chosen)
        # joined into chunks here, so that the event loop writes a chunk per few dozen hosts
        return Parts.in_chunks(rendering.host_parts(hosts))

    views = request.app[UNION_VIEWS]
    asker = known(request)
    parts = await (views.shared(("hosts", fmt), fmt, build, known=asker) if chosen is None
                   else views.build(fmt, build, known=asker))
    return web.Response(body=Joined(parts, request.app[GLUE].formats[fmt].media_type))


async def get_glue_entity(request: web.Request) -> web.Response:
    """A cluster or subcluster of the union, with its hosts, rendered in a worker thread; any other
    entity is one host or CE, as the site renders it."""
    kind, ident = glue.entity_asked(request)
    if kind not in ("clusters", "subclusters"):
        return await glue.get_glue_entity(request)
    fmt = format_of(request)
    body = await request.app[UNION_VIEWS].shared(("entity", fmt, kind, ident), fmt,
                                                 lambda rendering, _: rendering.entity(kind, ident),
                                                 known=known(request))
    return glue.entity_answer(kind, ident, body, request.app[GLUE].formats[fmt].media_type)


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
_REPLACED: dict[Handler, Handler] = {glue.get_glue: get_glue, glue.get_glue_hosts: get_glue_hosts,
                                     glue.get_glue_entity: get_glue_entity, meta.healthz: healthz,
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
    # renderings below serve them, and render single hosts and CEs of the last union (the rest
    # that reads its hosts is UnionViews', in a worker thread).
    publisher = Publisher(federation)
    await publisher.publish()  # the top's own hosts, before the first pull
    union = app[GLUE] = Glue(federation)
    app[UNION_VIEWS] = UnionViews(federation)
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
