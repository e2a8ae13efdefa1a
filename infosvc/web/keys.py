"""Every aiohttp AppKey of the service, in one place."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable, Final

from aiohttp import web

from infosvc.publish.glue import Glue
from infosvc.publish.prometheus import Metrics
from infosvc.hosts import Aggregator, Role
from infosvc.config import SiteConfig
from infosvc.queue import JobQueue
from infosvc.lrms.reader import ClusterReader

if TYPE_CHECKING:
    from infosvc.federation.pull import Federation
    from infosvc.web.slurmjobs import SlurmSide
    from infosvc.web.match import MatchGate
    from infosvc.web.routes import Route
    from infosvc.web.gridquery import GridAnswers, WholeTrees
    from infosvc.web.federation import UnionViews
    from infosvc.web.turns import Turns
    from infosvc.web.auth import Caller
    from infosvc.web.prometheus import Shared

CONFIG = web.AppKey("config", SiteConfig)
AGGREGATOR = web.AppKey("aggregator", Aggregator)
METRICS = web.AppKey("metrics", Metrics)
GLUE = web.AppKey("glue", Glue)
JOB_QUEUE = web.AppKey("job_queue", JobQueue)
MATCH_GATE: web.AppKey["MatchGate"] = web.AppKey("match_gate")
#: Slurm's side of the job routes when it runs the site's jobs (infosvc/web/slurmjobs.py)
SLURM: web.AppKey["SlurmSide"] = web.AppKey("slurm")
#: a top level's upstreams and their union (infosvc/web/federation.py)
FEDERATION: web.AppKey["Federation"] = web.AppKey("federation")
#: past views of the site being built now (GET /v1/glue?at=), by their one slot
PAST_VIEWS = web.AppKey("past_views", asyncio.Semaphore)
#: the grid formats' documents as last rendered, and their renderings, one at a time (infosvc/web/gridquery.py)
GRID_ANSWERS: web.AppKey["GridAnswers"] = web.AppKey("grid_answers")
#: the site's whole tree in JSON and XML, and its clusters and subclusters, kept and shared the same
#: way (infosvc/web/gridquery.py)
WHOLE_TREES: web.AppKey["WholeTrees"] = web.AppKey("whole_trees")
#: large answers indented for `?pretty=1`, one at a time (infosvc/web/pretty.py)
INDENTS: web.AppKey["Turns"] = web.AppKey("indents")
#: the renderings of GET /metrics and GET /v1/prometheus/targets, each shared by its readers at once
#: (infosvc/web/prometheus.py)
SCRAPES: web.AppKey["Shared"] = web.AppKey("scrapes")
TARGET_LISTS: web.AppKey["Shared"] = web.AppKey("target_lists")
#: GET /v1/jobs's listings, one at a time (infosvc/web/jobs.py)
JOB_LISTINGS: web.AppKey["Turns"] = web.AppKey("job_listings")
#: a top level's renderings of the union's hosts, one at a time in a worker thread (infosvc/web/federation.py)
UNION_VIEWS: web.AppKey["UnionViews"] = web.AppKey("union_views")
#: the worker slots that build history answers (GET /v1/nodes/{id}/history) take turns on
HISTORY_WORKERS = web.AppKey("history_workers", asyncio.Semaphore)
#: the Slurm cluster's reader ([lrms] type = "slurm"; absent otherwise)
LRMS_READER = web.AppKey("lrms_reader", ClusterReader)
#: handler -> its entry in the route table, for the authorizing middleware
ROUTE_TABLE: web.AppKey[dict[Callable[..., Any], "Route"]] = web.AppKey("route_table")
#: a request's caller (infosvc/web/auth.py sets it): None when it came without a valid token
CALLER: web.RequestKey["Caller | None"] = web.RequestKey("caller")


#: the roles whose readers have places of their own in the render queues: a BDII's provider reads
#: with a read token; agent and submit tokens are on every host and with every user, and a flood
#: with one of them filled the places meant for the provider
READERS: Final = frozenset({Role.READ, Role.ADMIN})
#: and in the job listings' queue, where users read their own jobs with their submit tokens
JOB_READERS: Final = READERS | {Role.SUBMIT}


def known(request: web.BaseRequest, roles: frozenset[Role] = READERS) -> bool:
    """Whether the request came with a valid token of one of `roles`: what it asks of work done in
    turns has places of its own (infosvc/web/turns.py)."""
    caller = request.get(CALLER)
    return caller is not None and caller.role in roles
