"""The HTTP API (aiohttp): a thin layer that reads requests, calls the aggregator and renders.

JSON by default; `Accept: application/xml` or `?format=xml` for XML. Every 4xx answer is
{"error": ..., "detail": ...}; a 5xx is a bug and is logged. Routes are listed in docs/api.md.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import logging
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from infosvc import __version__
from infosvc.site.aggregator import Aggregator, Refused
from infosvc.web.keys import AGGREGATOR, CONFIG, MATCH_GATE, METRICS
from infosvc.codec.safexml import SCHEMA_DIR
from infosvc.errors import MESSAGE_CHARS, DocumentError, excerpt
from infosvc.model.hostid import canonical
from infosvc.site.hosts import HostEntry
from infosvc.matching.hostcolumns import HostColumns, columns_for
from infosvc.matching import (
    AnswerLimits, MatchError, MatchResult, MatchTooCostly, Requirements, Site, SiteSnapshot, SiteView, SyncedColumns,
    check_range_budget, compile_requirements, match,
)
from infosvc.publish.prometheus import Metrics
from infosvc.model.job import Job, JobGroup, resolve
from infosvc.model.node import Node
from infosvc.site.query import HostFilter, QueryError
from infosvc.site.config import SiteConfig
from infosvc.store import Store, StoreCorrupt, StoreError
from infosvc.codec.submission import parse_submission
from infosvc.publish.targets import targets
from infosvc.site.tokens import Role, Tokens

if TYPE_CHECKING:
    from infosvc.site.rollup import Rollup

    def _rollup_is_a_site_view(rollup: Rollup) -> SiteView:
        """For mypy alone: the roll-up POST /v1/match hands the matcher is what it reads of a site."""
        return rollup

log = logging.getLogger("infosvc.web.app")

JSON = "application/json"
XML = "application/xml"


def error_body(status: int, error: str, detail: Any = None) -> web.Response:
    """The JSON error answer; its texts cut to MESSAGE_CHARS, whatever input they quote."""
    if isinstance(detail, str):
        detail = excerpt(detail, MESSAGE_CHARS)
    return web.json_response({"error": excerpt(error, MESSAGE_CHARS), "detail": detail}, status=status)


@web.middleware
async def errors_as_json(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
    try:
        return await handler(request)
    except Refused as exc:
        return error_body(exc.status, exc.message, exc.detail)
    except DocumentError as exc:
        return web.json_response(exc.as_json(), status=400)
    except QueryError as exc:
        return error_body(400, str(exc), {"parameter": exc.parameter})
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_body(exc.status, exc.reason, exc.text if exc.text and exc.text != f"{exc.status}: {exc.reason}" else None)
    except asyncio.CancelledError:
        raise
    except StoreCorrupt:
        # The file is damaged: trying again will not mend it, so not a 503 with Retry-After (agents
        # would retry for ever). The store has logged it, naming the file, once a minute at most.
        return error_body(500, "store damaged",
                          "the server's database is damaged; its operator must restore it from a backup")
    except (StoreError, sqlite3.Error) as exc:
        # The disk is full or the file is locked: nothing was kept, and the sender may try again.
        log.error("store unavailable in %s %s: %s", request.method, request.path, exc)
        response = error_body(503, "store unavailable", "nothing was stored; try again later")
        response.headers["Retry-After"] = "5"
        return response
    except Exception:
        log.exception("unhandled error in %s %s", request.method, request.path)
        return error_body(500, "internal error", "this is a bug in infosvc; the log has the details")


def wants_xml(request: web.Request) -> bool:
    fmt = request.query.get("format")
    if fmt is not None:
        if fmt not in ("json", "xml"):
            raise QueryError("format", "expected json or xml")
        return fmt == "xml"
    accept = request.headers.get("Accept", "")
    return ("application/xml" in accept or "text/xml" in accept) and JSON not in accept


def aggregator(request: web.Request) -> Aggregator:
    return request.app[AGGREGATOR]


# --- nodes ------------------------------------------------------------------------------------

def refuse_announced_size(request: web.Request, agg: Aggregator, *, reports: bool = False) -> None:
    """413 before reading when the client says the body is larger than the limit."""
    limit = agg.config.service.max_body_bytes
    if request.content_length is not None and request.content_length > limit:
        if reports:
            agg.rejected["too_large"] += 1
        raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=request.content_length)


async def read_body(request: web.Request, agg: Aggregator, *, reports: bool = False) -> bytes:
    """The request's body, refused when larger than the limit (413), not all there within the
    body timeout (408), or broken (400). With `reports`, refusals count as refused reports."""
    def refuse(reason: str) -> None:
        if reports:
            agg.rejected[reason] += 1

    refuse_announced_size(request, agg, reports=reports)
    try:
        # asyncio.timeout, not wait_for: no task and no extra loop round per request.
        async with asyncio.timeout(agg.config.service.body_timeout_seconds):
            return await request.read()
    except TimeoutError:
        refuse("timeout")
        raise Refused(408, "request body not received in time",
                      f"the whole body must arrive within {agg.config.service.body_timeout_seconds} s") from None
    except web.HTTPRequestEntityTooLarge:
        refuse("too_large")
        raise
    except web.RequestPayloadError as exc:  # broken compression, or framing the parser let through
        refuse("invalid")
        raise Refused(400, "request body could not be read", str(exc).strip()) from None
    except ConnectionResetError:  # the client hung up before the whole body came: no one to answer
        refuse("invalid")
        raise Refused(400, "connection lost before the whole body arrived") from None


async def post_node(request: web.Request) -> web.Response:
    started = time.perf_counter()
    agg = aggregator(request)
    refuse_announced_size(request, agg, reports=True)  # before the token is even looked at
    try:
        agg.authorize(request.headers.get("Authorization"), Role.AGENT)
    except Refused as exc:  # counted as Aggregator.ingest counts them
        agg.rejected["unauthorized" if exc.status == 401 else "forbidden"] += 1
        raise
    body = await read_body(request, agg, reports=True)
    entry = await agg.ingest(request.headers.get("Authorization"), body)
    request.app[METRICS].ingest_seconds.observe(time.perf_counter() - started)
    return web.Response(body=json.dumps({"host": entry.id, "state": entry.state.value}).encode(), content_type=JSON)


def render_nodes(entries: list[HostEntry], xml: bool) -> web.Response:
    if xml:
        body = b"<?xml version='1.0' encoding='UTF-8'?>\n<Nodes>" + b"".join(e.xml() for e in entries) + b"</Nodes>\n"
        return web.Response(body=body, content_type=XML)
    return web.Response(body=b"[" + b",".join(e.json() for e in entries) + b"]", content_type=JSON)


async def get_nodes(request: web.Request) -> web.Response:
    agg = aggregator(request)
    agg.authorize_read(request.headers.get("Authorization"))
    selected = list(HostFilter.parse(request.query.items()).select(agg.table))
    return render_nodes(selected, wants_xml(request))


async def get_node(request: web.Request) -> web.Response:
    agg = aggregator(request)
    agg.authorize_read(request.headers.get("Authorization"))
    xml = wants_xml(request)
    entry = agg.table.get(canonical(request.match_info["id"]))
    if entry is None:
        raise Refused(404, f"no node {excerpt(request.match_info['id'])!r}")
    if xml:
        return web.Response(body=b"<?xml version='1.0' encoding='UTF-8'?>\n" + entry.xml() + b"\n", content_type=XML)
    return web.Response(body=entry.json(), content_type=JSON)


# --- GLUE -------------------------------------------------------------------------------------

GLUE_KINDS = ("computing-elements", "clusters", "subclusters", "hosts")


async def get_glue(request: web.Request) -> web.Response:
    agg = aggregator(request)
    agg.authorize_read(request.headers.get("Authorization"))
    if wants_xml(request):
        return web.Response(body=agg.glue_xml.tree(), content_type=XML)
    return web.Response(body=agg.glue_json.tree(), content_type=JSON)


async def get_glue_hosts(request: web.Request) -> web.Response:
    agg = aggregator(request)
    agg.authorize_read(request.headers.get("Authorization"))
    hosts = agg.table.rollup.hosts
    selected = [hosts[e.id] for e in HostFilter.parse(request.query.items()).select(agg.table) if e.id in hosts]
    if wants_xml(request):
        return web.Response(body=agg.glue_xml.hosts(selected), content_type=XML)
    return web.Response(body=agg.glue_json.hosts(selected), content_type=JSON)


async def get_glue_entity(request: web.Request) -> web.Response:
    agg = aggregator(request)
    agg.authorize_read(request.headers.get("Authorization"))
    kind, ident = request.match_info["kind"], request.match_info["id"]
    if kind == "hosts":
        ident = canonical(ident)  # as every route addresses a host (infosvc.model.hostid)
    if kind not in GLUE_KINDS:
        raise Refused(404, f"no GLUE kind {kind!r}", f"one of {', '.join(GLUE_KINDS)}")
    xml = wants_xml(request)
    body = (agg.glue_xml if xml else agg.glue_json).entity(kind, ident)
    if body is None:
        raise Refused(404, f"no {kind[:-1].replace('-', ' ')} {ident!r}")
    return web.Response(body=body, content_type=XML if xml else JSON)


# --- matching ---------------------------------------------------------------------------------

#: The most jobs one POST /v1/match answers for: every answer lists every host with its reasons,
#: so one small body of many jobs could otherwise cost minutes of CPU and gigabytes of answer.
MAX_MATCH_JOBS = 16

#: Sites of up to this many hosts are matched on the event loop (a few ms at most, within the work
#: budget); larger ones in a worker thread, over a snapshot of the roll-up, so that the loop goes
#: on taking reports meanwhile.
RENDER_IN_THREAD_HOSTS = 500

#: POST /v1/match requests under way at once; the next is answered 503 at once, before its body is
#: read, so that a flood of matches holds neither memory nor the event loop.
MAX_MATCHES_IN_FLIGHT = 8
#: Seconds of matching and explaining one POST /v1/match may cost, all its jobs together.
MATCH_BUDGET_SECONDS = 2.0
#: Worker threads that parse and match POST /v1/match bodies: the rest wait their turn.
MATCH_WORKERS = 2

#: POST /v1/match's query parameters: (default, most).
ANSWER_PARAMETERS: dict[str, tuple[int, int]] = {
    "limit": (1000, 10_000), "rejected_limit": (100, 1000), "rejected_offset": (0, 1 << 31)}


class MatchGate:
    """How many POST /v1/match requests are under way, and the workers their parsing and matching
    take turns on."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.workers = asyncio.Semaphore(MATCH_WORKERS)


@dataclass(slots=True)
class PreparedMatch:
    """A POST /v1/match body read into jobs, checked against the request's budget, compiled."""

    jobs: list[Job]
    compiled: list[Requirements]
    warnings: list[str]


def prepare_match(body: bytes, content_type: str) -> PreparedMatch:
    """Parse, resolve and compile a POST /v1/match body (in a worker thread: a body of 1 MB takes
    tens of ms to parse). The Ranges of all its jobs share one budget, checked before any is
    expanded."""
    job, warnings = parse_submission(body, content_type)  # SSS Job XML, CCS job XML or grid JSON v2
    jobs = resolve(job)
    if not jobs:
        raise Refused(400, "the JobGroup has no job to match")
    if len(jobs) > MAX_MATCH_JOBS:  # each answer names every host: ~2 MB and ~0.1 s at 10,000 hosts
        raise Refused(400, f"a match takes at most {MAX_MATCH_JOBS} jobs; this JobGroup has {len(jobs)}",
                      "send the jobs in smaller groups")
    try:
        check_range_budget(jobs)
    except MatchError as exc:
        raise Refused(400, "the job cannot be matched as written", str(exc)) from None
    compiled = []
    for one in jobs:
        try:
            compiled.append(compile_requirements(one))
        except MatchError as exc:
            detail = str(exc) if len(jobs) == 1 else f"job {excerpt(one.id)}: {exc}"
            raise Refused(400, "the job cannot be matched as written", detail) from None
    return PreparedMatch(jobs, compiled, warnings)


def answer_limits(request: web.Request) -> AnswerLimits:
    values = {}
    for name, (default, most) in ANSWER_PARAMETERS.items():
        text = request.query.get(name)
        if text is None:
            values[name] = default
            continue
        least = 0 if name == "rejected_offset" else 1
        if not (text.isascii() and text.isdigit() and len(text) <= 12) or not least <= int(text) <= most:
            raise QueryError(name, f"expected a whole number from {least} to {most}")
        values[name] = int(text)
    unknown = sorted(set(request.query) - set(ANSWER_PARAMETERS))
    if unknown:
        raise QueryError(unknown[0], f"unknown; expected one of {', '.join(ANSWER_PARAMETERS)}")
    return AnswerLimits(values["limit"], values["rejected_limit"], values["rejected_offset"])


def match_answer(job: Job, result: MatchResult, warnings: list[str], limits: AnswerLimits) -> dict[str, Any]:
    """The answer for one job: its matches and rejected hosts, its id, the warnings."""
    answer = result.as_json(limits)
    answer["job"] = job.id
    answer["warnings"] = warnings + list(result.notes)
    return answer


def render_match(jobs: list[Job], results: list[MatchResult], warnings: list[str], group: bool,
                 limits: AnswerLimits | None = None) -> str:
    """The body of POST /v1/match: one job's answer as it always was; for a JobGroup of several
    jobs, {"jobs": [...]}, each the one-job answer with the job's name too (docs/matching.md)."""
    limits = limits or AnswerLimits()
    if not group:
        return json.dumps(match_answer(jobs[0], results[0], warnings, limits))
    return json.dumps({"jobs": [{**match_answer(job, result, warnings, limits), "name": job.properties.get("Name")}
                                for job, result in zip(jobs, results)]})


def match_and_render(prepared: PreparedMatch, rollup: SiteView, node_of: Callable[[str], Node | None], site: Site,
                     columns: HostColumns | SyncedColumns | None, limits: AnswerLimits) -> str:
    """Every job matched and the answer written, within the request's work budget."""
    results = [match(requirements, rollup, node_of, site, columns=columns) for requirements in prepared.compiled]
    return render_match(prepared.jobs, results, prepared.warnings, len(prepared.jobs) > 1, limits)


async def post_match(request: web.Request) -> web.Response:
    """A dry run: which hosts fit this job (each job of a JobGroup), best first, and why the others
    do not (infosvc/matching/). Parsing, and on large sites matching, run in worker threads; the
    whole is bounded in requests under way, in the names its Ranges expand to, in seconds of work,
    and in the size of its answer (docs/security.md)."""
    agg = aggregator(request)
    agg.authorize_read(request.headers.get("Authorization"))
    limits = answer_limits(request)
    gate = request.app[MATCH_GATE]
    if gate.in_flight >= MAX_MATCHES_IN_FLIGHT:
        response = error_body(503, "too many match requests under way", "try again shortly")
        response.headers["Retry-After"] = "1"
        return response
    gate.in_flight += 1
    try:
        body = await read_body(request, agg)
        async with gate.workers:
            prepared = await asyncio.to_thread(prepare_match, body, request.headers.get("Content-Type", ""))
            for requirements in prepared.compiled:  # one budget for the request: its jobs share it
                requirements.start_budget(MATCH_BUDGET_SECONDS)
            entries = agg.table.entries

            def node_of(host_id: str) -> Node | None:
                entry = entries.get(host_id)
                return entry.node if entry is not None else None

            rollup = agg.table.rollup
            site = Site.of(rollup)
            # The columns kept for this roll-up: the HostTable's nodes change only with their Hosts.
            keeper = columns_for(rollup)
            try:
                if len(rollup.hosts) <= RENDER_IN_THREAD_HOSTS:
                    text = match_and_render(prepared, rollup, node_of, site, keeper, limits)
                else:
                    snapshot = SiteSnapshot(rollup, node_of)
                    synced = SyncedColumns(keeper.sync(rollup, node_of))
                    text = await asyncio.to_thread(match_and_render, prepared, snapshot, snapshot.node_of, site,
                                                   synced, limits)
            except MatchTooCostly as exc:
                raise Refused(400, "the job is too costly to match against this site", str(exc)) from None
    finally:
        gate.in_flight -= 1
    return web.Response(text=text, content_type=JSON)


# --- admin ------------------------------------------------------------------------------------

ADMIN_ACTIONS: dict[str, dict[str, bool]] = {
    "approve": {"approved": True},
    "pause": {"paused": True},
    "resume": {"paused": False},
}


async def post_admin(request: web.Request) -> web.Response:
    agg = aggregator(request)
    agg.authorize(request.headers.get("Authorization"), Role.ADMIN)
    action = request.match_info["action"]
    if action not in ADMIN_ACTIONS:
        raise Refused(404, f"no admin action {action!r}", f"one of {', '.join(ADMIN_ACTIONS)}")
    entry = await agg.set_flags(canonical(request.match_info["id"]), **ADMIN_ACTIONS[action])
    return web.json_response({"host": entry.id, "state": entry.state.value})


async def get_prometheus_targets(request: web.Request) -> web.Response:
    """Prometheus HTTP service discovery (http_sd_configs): the hosts' exporters; see infosvc/targets.py."""
    agg = aggregator(request)
    agg.authorize_read(request.headers.get("Authorization"))
    return web.json_response(targets(agg.table, agg.config.prometheus.exporter_port))


# --- the API's own description ----------------------------------------------------------------

#: The files of schemas/ served at /schemas/{name}: what /openapi.json refers to, and the XML
#: Schemas that bodies are validated with. Open to all, like /healthz: they describe, not the site.
PUBLISHED_SCHEMAS: dict[str, str] = {
    "openapi.json": JSON,
    "sss-node.schema.json": JSON,
    "glue.schema.json": JSON,
    "sss-node.xsd": XML,
    "glue-ce-1.1.xsd": XML,
}


@functools.cache
def published_schema(name: str) -> bytes:
    """A file of schemas/, read once and served as it is."""
    return (SCHEMA_DIR / name).read_bytes()


async def get_openapi(request: web.Request) -> web.Response:
    return web.Response(body=published_schema("openapi.json"), content_type=JSON)


async def get_schema(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in PUBLISHED_SCHEMAS:
        raise Refused(404, f"no schema {name!r}", f"one of {', '.join(PUBLISHED_SCHEMAS)}")
    return web.Response(body=published_schema(name), content_type=PUBLISHED_SCHEMAS[name])


async def healthz(request: web.Request) -> web.Response:
    agg = aggregator(request)
    if not agg.store.writing:  # reports could not be stored: say so to whoever watches the service
        error = (f"the database file is damaged ({agg.store.damage}); restore it from a backup"
                 if agg.store.damage else "the store's writer has stopped")
        return web.json_response({"status": "failing", "error": error,
                                  "version": __version__, "hosts": len(agg.table)}, status=503)
    return web.json_response({"status": "ok", "version": __version__, "hosts": len(agg.table)})


# --- the application --------------------------------------------------------------------------

async def get_metrics(request: web.Request) -> web.Response:
    agg = aggregator(request)
    agg.authorize_read(request.headers.get("Authorization"))
    metrics = request.app[METRICS]
    # The hosts that changed since the last scrape have their lines rendered a slice at a time,
    # the loop given back in between, so a scrape of 10,000 hosts holds no report up for long;
    # then the exposition joins the kept lines (and renders any host that changed meanwhile).
    entries = list(agg.table)
    for start in range(0, len(entries), METRICS_SLICE):
        metrics.warm(entries[start:start + METRICS_SLICE])
        await asyncio.sleep(0)
    return web.Response(body=metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST})


#: Hosts whose /metrics lines are rendered between two turns of the event loop (~10 ms of work).
METRICS_SLICE = 500


async def _metrics_ctx(app: web.Application) -> AsyncIterator[None]:
    app[METRICS].watch(app[AGGREGATOR])  # after aggregator_ctx, which made it
    try:
        yield
    finally:
        app[METRICS].unwatch()


async def _aggregator_ctx(app: web.Application, store_path: str, tokens: Tokens) -> AsyncIterator[None]:
    config = app[CONFIG]
    store = await asyncio.to_thread(Store, store_path, history_per_host=config.store.history_per_host)
    # The rebuild allocates hundreds of thousands of long-lived objects: collecting while it runs
    # only rescans them. Once built, they are frozen out of every later collection.
    gc.disable()
    try:
        app[AGGREGATOR] = await asyncio.to_thread(Aggregator, config, store, tokens)
    finally:
        gc.enable()
    await app[AGGREGATOR].start()
    gc.collect()
    gc.freeze()
    sweeper = asyncio.create_task(_sweep_forever(app[AGGREGATOR], config))
    try:
        yield
    finally:
        sweeper.cancel()
        await asyncio.to_thread(store.close)


async def _sweep_forever(agg: Aggregator, config: SiteConfig) -> None:
    # Often enough that a host turns Unreachable within a few seconds of its deadline.
    interval = max(0.05, min(config.lifecycle.heartbeat_seconds / 4, 5.0))
    while True:
        await asyncio.sleep(interval)
        try:
            agg.sweep()
        except Exception:  # noqa: BLE001 - the sweeper must outlive a bug in one sweep
            log.exception("liveness sweep failed")


def make_app(config: SiteConfig, *, db: str | Path | None = None, tokens: Tokens | None = None) -> web.Application:
    """The one app factory. `db` overrides the config's store path."""
    app = web.Application(client_max_size=config.service.max_body_bytes, middlewares=[errors_as_json])
    app[CONFIG] = config
    store_path = str(db if db is not None else config.service.db)
    known = tokens if tokens is not None else Tokens()

    async def aggregator_ctx(app: web.Application) -> AsyncIterator[None]:
        async for _ in _aggregator_ctx(app, store_path, known):
            yield

    app.cleanup_ctx.append(aggregator_ctx)
    app[METRICS] = Metrics()
    app[MATCH_GATE] = MatchGate()
    app.cleanup_ctx.append(_metrics_ctx)
    app.router.add_post("/v1/nodes", post_node)
    app.router.add_get("/v1/nodes", get_nodes)
    app.router.add_get("/v1/nodes/{id}", get_node)
    app.router.add_get("/v1/glue", get_glue)
    app.router.add_get("/v1/glue/hosts", get_glue_hosts)
    app.router.add_get("/v1/glue/{kind}/{id}", get_glue_entity)
    app.router.add_post("/v1/match", post_match)
    app.router.add_post("/v1/admin/hosts/{id}/{action}", post_admin)
    app.router.add_get("/v1/prometheus/targets", get_prometheus_targets)
    app.router.add_get("/metrics", get_metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/openapi.json", get_openapi)
    app.router.add_get("/schemas/{name}", get_schema)
    return app
