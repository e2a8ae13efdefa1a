"""Every aiohttp AppKey of the service, in one place."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from infosvc.site.aggregator import Aggregator
from infosvc.publish.prometheus import Metrics
from infosvc.site.config import SiteConfig

CONFIG = web.AppKey("config", SiteConfig)
AGGREGATOR = web.AppKey("aggregator", Aggregator)
METRICS = web.AppKey("metrics", Metrics)
if TYPE_CHECKING:
    from infosvc.web.app import MatchGate
MATCH_GATE: web.AppKey["MatchGate"] = web.AppKey("match_gate")
