"""GET /metrics (the exposition, infosvc/publish/prometheus.py) and GET /v1/prometheus/targets
(HTTP service discovery, infosvc/publish/targets.py)."""

from __future__ import annotations

import asyncio
import json
from typing import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from infosvc.publish.targets import by_id, listed_group, target_policy
from infosvc.web.keys import AGGREGATOR, METRICS, SCRAPES, TARGET_LISTS

#: Hosts whose /metrics lines are rendered between two turns of the event loop (~10 ms of work).
METRICS_SLICE = 500
#: Hosts whose target groups are made between two turns of the event loop (~6 ms of work).
TARGETS_SLICE = 500


class Shared:
    """One rendering of an answer at a time, shared by every reader that asks while it is under
    way (each reader after it gets one anew): 300 scrapes at once of a 10,000-host site each
    rendered its own 8.9 MB and held it until its client read it (or was dropped 10 s later), and
    took the server from 160 MB to 2.85 GB; now one rendering, one body written to them all."""

    def __init__(self) -> None:
        self._flight: asyncio.Future[bytes] | None = None

    async def answer(self, render: Callable[[], Awaitable[bytes]]) -> bytes:
        if self._flight is None:
            flight = self._flight = asyncio.ensure_future(render())
            flight.add_done_callback(lambda _: self._landed(flight))
        return await asyncio.shield(self._flight)

    def _landed(self, flight: asyncio.Future[bytes]) -> None:
        if self._flight is flight:
            self._flight = None
        if not flight.cancelled():
            flight.exception()  # its readers' to see: not also "never retrieved" when none is left


async def get_metrics(request: web.Request) -> web.Response:
    agg = request.app[AGGREGATOR]
    metrics = request.app[METRICS]

    async def render() -> bytes:
        # The hosts that changed since the last scrape have their lines rendered a slice at a
        # time, the loop given back in between, so a scrape of 10,000 hosts holds no report up
        # for long; then the exposition joins the kept lines (and renders any host that changed
        # meanwhile).
        entries = agg.node_entries()
        for start in range(0, len(entries), METRICS_SLICE):
            metrics.warm(entries[start:start + METRICS_SLICE])
            await asyncio.sleep(0)
        return metrics.exposition()

    body = await request.app[SCRAPES].answer(render)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def get_prometheus_targets(request: web.Request) -> web.Response:
    """Prometheus HTTP service discovery (http_sd_configs): the hosts' exporters, as
    publish/targets.py's `targets`, a slice of hosts at a time with the loop's turn between two
    (~12 ms a 1,000 hosts: the address policy and the groups; unauthenticated, and a scrape of
    10,000 hosts held the loop ~0.1 s in one piece), shared by the readers at once."""
    agg = request.app[AGGREGATOR]

    async def render() -> bytes:
        config = agg.config.prometheus
        policy = target_policy(config.target_networks, config.target_names)
        entries = sorted(agg.table, key=by_id)
        groups = []
        for start in range(0, len(entries), TARGETS_SLICE):
            if start:
                await asyncio.sleep(0)
            groups += [group for entry in entries[start:start + TARGETS_SLICE]
                       if (group := listed_group(entry, agg.table, config.exporter_port, policy))]
        return json.dumps(groups).encode()

    body = await request.app[TARGET_LISTS].answer(render)
    return web.Response(body=body, content_type="application/json", charset="utf-8")
