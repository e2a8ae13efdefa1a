"""The HTTP API's app factory: the routes of the route table (infosvc/web/routes.py) behind the
middlewares, outermost first: CORS (only with service.cors_origins), readable answers, errors as
JSON, authorization; and the app's life: the store and the aggregator built at start, the
liveness sweeper, the metrics' watch, the garbage collector's schedule. JSON by default;
`Accept: application/xml` or `?format=xml` for XML. Routes are listed in docs/api.md."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from pathlib import Path
from typing import AsyncIterator, Final

from aiohttp import web

from infosvc.publish.glue import Glue
from infosvc.publish.prometheus import Metrics
from infosvc.matching import Site
from infosvc.sched import Policy
from infosvc.hosts import Aggregator
from infosvc.config import SiteConfig
from infosvc.queue import JobQueue
from infosvc.hosts import Tokens
from infosvc.lrms.reader import ClusterReader
from infosvc.store import Store
from infosvc.publish.faultmetrics import FaultCollector
from infosvc.web.auth import authorize
from infosvc.web.cors import cors
from infosvc.web.errors import errors_as_json
from infosvc.web.federation import federate
from infosvc.web.garbage import scheduled_collection
from infosvc.web.gridquery import GridAnswers, WholeTrees
from infosvc.web.pretty import INDENTS_WAITING, readable
from infosvc.web.turns import Turns
from infosvc.web.keys import (
    AGGREGATOR, CONFIG, GLUE, GRID_ANSWERS, HISTORY_WORKERS, INDENTS, JOB_LISTINGS, JOB_QUEUE, LRMS_READER, MATCH_GATE,
    METRICS, PAST_VIEWS, SCRAPES, SLURM, TARGET_LISTS, WHOLE_TREES,
)
from infosvc.web.jobs import LISTINGS_WAITING
from infosvc.web.match import MatchGate
from infosvc.web.prometheus import Shared
from infosvc.web.opening import OPEN, OPENING
from infosvc.web.nodes import HISTORY_THREADS
from infosvc.web.routes import add_routes
from infosvc.web.slurmside import SlurmSide

log = logging.getLogger("infosvc.web")


async def _metrics_ctx(app: web.Application) -> AsyncIterator[None]:
    app[METRICS].watch(app[AGGREGATOR])  # after aggregator_ctx, which made it
    faults = FaultCollector(app[AGGREGATOR])
    app[METRICS].registry.register(faults)
    try:
        yield
    finally:
        app[METRICS].registry.unregister(faults)
        app[METRICS].unwatch()


async def _aggregator_ctx(app: web.Application, store_path: str, tokens: Tokens) -> AsyncIterator[None]:
    """The store and the aggregator, made at start; the hosts read, and the rest opened, in
    `_open` while the server already answers (infosvc/web/opening.py), except on a top level,
    whose federation starts from them. At a clean stop the hosts are kept as a snapshot, which
    the next start reads instead of parsing every report again."""
    config = app[CONFIG]
    store = await asyncio.to_thread(Store, store_path, history_per_host=config.store.history_per_host)
    if config.lrms.slurm:  # the Slurm submissions a stop left to withdraw go on (infosvc/web/slurmside.py)
        await app[SLURM].keep_in(store)
    agg = app[AGGREGATOR] = await asyncio.to_thread(Aggregator, config, store, tokens, load=False)
    app[GLUE] = Glue(agg.tree)
    app[JOB_QUEUE] = JobQueue(store, agg.table, site=lambda: Site.of(agg.tree), clock=agg.clock,
                              policy=Policy(config.scheduler.policy), executors=tokens.executor_hosts,
                              start_timeout=config.scheduler.start_timeout_seconds, drain=agg.drain,
                              keep_ended_days=config.scheduler.keep_ended_days)
    opened = app[OPEN] = asyncio.Event()
    running: list[asyncio.Task[None]] = []
    opening = app[OPENING] = asyncio.create_task(_open(app, agg, running))
    if config.federation.upstreams:
        await opening
    try:
        yield
    finally:
        opening.cancel()
        for task in running:
            task.cancel()
        if opened.is_set():
            try:
                kept = await agg.save_snapshot()
                log.info("%d hosts kept for the next start", kept)
            except Exception as exc:  # noqa: BLE001 - the next start reads the reports instead
                log.warning("the hosts' snapshot was not kept (%s): the next start reads every report", exc)
        await asyncio.to_thread(store.close)


async def _open(app: web.Application, agg: Aggregator, running: list[asyncio.Task[None]]) -> None:
    """Read the hosts (in a thread, which has the table to itself: every request that touches it
    waits for OPEN), then start the GLUE renderings, the queue, the sweeper; then OPEN."""
    config = app[CONFIG]
    started = time.monotonic()
    try:
        hosts = await asyncio.to_thread(agg.load)
    except Exception:
        log.exception("the hosts could not be read from the store: nothing is served but /healthz")
        raise
    # The rebuild allocates hundreds of thousands of long-lived objects: young passes move them to
    # the old generation as they come (scheduled_collection), one full pass once they are built.
    gc.collect()
    await agg.start()
    # Every host's GLUE rendered at start, not in the first reader's request; then as hosts change.
    glue = app[GLUE]
    await asyncio.to_thread(glue.warm, list(agg.tree.hosts.values()))
    agg.on_change.append(glue.warm)
    queue = app[JOB_QUEUE]
    agg.tree.read_queue(queue)  # the CEs publish the queue's figures
    reading = time.monotonic()
    jobs = await asyncio.to_thread(queue.load)
    if jobs:
        log.info("job queue: %d jobs read from the store in %.2f s", jobs, time.monotonic() - reading)
    agg.on_change.append(queue.hosts_changed)
    agg.on_remove.append(queue.host_removed)
    running.append(asyncio.create_task(_sweep_forever(agg, config)))
    running.append(asyncio.create_task(queue.run_forever()))
    running.append(asyncio.create_task(queue.ended.prune_forever()))  # at start, then every hour
    if agg.slurm is not None:  # a Slurm cluster's state read every interval, off the loop (docs/slurm.md)
        reader = app[LRMS_READER] = ClusterReader(config.lrms)
        reader.in_thread.append(agg.prepare_slurm)
        reader.on_read.append(agg.publish_slurm)
        running.append(asyncio.create_task(reader.run_forever()))
    queue.poke()
    app[OPEN].set()
    log.info("%d hosts read (%d from the snapshot of the last clean stop) and published in %.2f s", hosts,
             agg.table.from_snapshot, time.monotonic() - started)


async def _collection_ctx(app: web.Application) -> AsyncIterator[None]:
    async for _ in scheduled_collection():
        yield


async def _sweep_forever(agg: Aggregator, config: SiteConfig) -> None:
    # Often enough that a host turns Unreachable within a few seconds of its deadline.
    interval = max(0.05, min(config.lifecycle.heartbeat_seconds / 4, 5.0))
    while True:
        await asyncio.sleep(interval)
        try:
            agg.sweep()
        except Exception:  # noqa: BLE001 - the sweeper must outlive a bug in one sweep
            log.exception("liveness sweep failed")


#: Every answer but the page's own files (which set their own, infosvc/web/page.py): no browser
#: sniffs an answer's JSON or XML (names agents and submitters chose) into a page, runs anything
#: in it, or frames it.
ANSWER_HEADERS: Final = {"X-Content-Type-Options": "nosniff",
                         "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'"}


async def _hardened(request: web.BaseRequest, response: web.StreamResponse) -> None:
    for name, value in ANSWER_HEADERS.items():
        response.headers.setdefault(name, value)


def make_app(config: SiteConfig, *, db: str | Path | None = None, tokens: Tokens | None = None) -> web.Application:
    """The one app factory. `db` overrides the config's store path."""
    app = web.Application(client_max_size=config.service.max_body_bytes,
                          middlewares=[*cors(config.service.cors_origins), readable, errors_as_json, authorize])
    app[CONFIG] = config
    app.on_response_prepare.append(_hardened)
    store_path = str(db if db is not None else config.service.db)
    known = tokens if tokens is not None else Tokens()

    async def aggregator_ctx(app: web.Application) -> AsyncIterator[None]:
        async for _ in _aggregator_ctx(app, store_path, known):
            yield

    app.cleanup_ctx.append(_collection_ctx)  # first: before the store's rebuild
    app.cleanup_ctx.append(aggregator_ctx)
    app[METRICS] = Metrics()
    app[MATCH_GATE] = MatchGate()
    app[PAST_VIEWS] = asyncio.Semaphore(1)
    app[GRID_ANSWERS], app[WHOLE_TREES] = GridAnswers(), WholeTrees()
    app[INDENTS] = Turns("a large answer is being indented", INDENTS_WAITING)
    app[JOB_LISTINGS] = Turns("other job listings are being read", LISTINGS_WAITING)
    app[SCRAPES], app[TARGET_LISTS] = Shared(), Shared()
    app[HISTORY_WORKERS] = asyncio.Semaphore(HISTORY_THREADS)
    app[SLURM] = SlurmSide.of(config.lrms)  # the job routes' Slurm mode (infosvc/web/slurmjobs.py)
    app.on_cleanup.append(lambda app: _stopped(app[SLURM]))
    app.cleanup_ctx.append(_metrics_ctx)
    if config.federation.upstreams:  # a top level over site aggregators (docs/grid.md)
        federate(app)
    else:
        add_routes(app)
    return app


async def _stopped(side: SlurmSide) -> None:
    side.stop()
