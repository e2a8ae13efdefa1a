"""GET /metrics (the exposition, infosvc/publish/prometheus.py) and GET /v1/prometheus/targets
(HTTP service discovery, infosvc/publish/targets.py)."""

from __future__ import annotations

import asyncio

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from infosvc.publish.targets import target_policy, targets
from infosvc.web.keys import AGGREGATOR, METRICS

#: Hosts whose /metrics lines are rendered between two turns of the event loop (~10 ms of work).
METRICS_SLICE = 500


async def get_metrics(request: web.Request) -> web.Response:
    agg = request.app[AGGREGATOR]
    metrics = request.app[METRICS]
    # The hosts that changed since the last scrape have their lines rendered a slice at a time,
    # the loop given back in between, so a scrape of 10,000 hosts holds no report up for long;
    # then the exposition joins the kept lines (and renders any host that changed meanwhile).
    entries = agg.node_entries()
    for start in range(0, len(entries), METRICS_SLICE):
        metrics.warm(entries[start:start + METRICS_SLICE])
        await asyncio.sleep(0)
    return web.Response(body=metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST})


async def get_prometheus_targets(request: web.Request) -> web.Response:
    """Prometheus HTTP service discovery (http_sd_configs): the hosts' exporters."""
    agg = request.app[AGGREGATOR]
    config = agg.config.prometheus
    return web.json_response(targets(agg.table, config.exporter_port,
                                     target_policy(config.target_networks, config.target_names)))
