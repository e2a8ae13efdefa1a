"""The route table: every route of the API with its handler and who may call it. The app is built
from this table alone, and the one authorizing middleware (infosvc/web/auth.py) reads it, so a
route added here states its access, and a route added elsewhere is refused."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from infosvc.hosts import PARAMETERS
from infosvc.web import admin, glue, jobcontrols, jobs, match, meta, nodes, page, prometheus
from infosvc.web.auth import Access, Handler
from infosvc.web.gridquery import GRID_PARAMETERS
from infosvc.web.pretty import PRETTY
from infosvc.web.keys import ROUTE_TABLE


@dataclass(frozen=True, slots=True)
class Route:
    method: str
    path: str
    handler: Handler
    access: Access
    #: the query parameters it takes: any other is refused before the handler runs (auth.py)
    params: tuple[str, ...] = ()
    #: its refusals count as refused reports (infosvc_reports_rejected_total)
    counts_reports: bool = False
    #: the path's last parameter takes the rest of the path, slashes included: a CE's UniqueID
    #: (ce.example.org:2119/jobmanager-pbs-long) holds one, and %2F is not what a user types
    rest: bool = False
    #: it answers JSON or XML, which `?pretty=1` indents (infosvc/web/pretty.py)
    pretty: bool = True

    @property
    def accepted(self) -> tuple[str, ...]:
        """Every query parameter it takes: its own, and `pretty` where its answer is JSON or XML."""
        return (*self.params, PRETTY) if self.pretty else self.params

    @property
    def pattern(self) -> str:
        """The path as the router matches it; `path` stays the template that /openapi.json shows."""
        if not self.rest:
            return self.path
        head, _, last = self.path.rpartition("{")
        return f"{head}{{{last[:-1]}:.+}}"


#: a GLUE or SSS rendering's choice of format (else the Accept header)
FORMAT = ("format",)
#: the host filters (infosvc/hosts/query.py), on every route that lists hosts
HOSTS = PARAMETERS

ROUTES: tuple[Route, ...] = (
    Route("POST", "/v1/nodes", nodes.post_node, Access.AGENT, counts_reports=True),
    Route("GET", "/v1/nodes", nodes.get_nodes, Access.READ, HOSTS),
    Route("GET", "/v1/nodes/{id}", nodes.get_node, Access.READ, FORMAT),
    Route("GET", "/v1/nodes/{id}/history", nodes.get_node_history, Access.READ, nodes.HISTORY_PARAMETERS),
    Route("GET", "/v1/glue", glue.get_glue, Access.READ, (*HOSTS, "at", *GRID_PARAMETERS)),
    Route("GET", "/v1/glue/hosts", glue.get_glue_hosts, Access.READ, HOSTS),
    # after /v1/glue/hosts, though aiohttp tries a plain path before a pattern whatever the order
    Route("GET", "/v1/glue/{kind}/{id}", glue.get_glue_entity, Access.READ, FORMAT, rest=True),
    Route("POST", "/v1/match", match.post_match, Access.READ, tuple(match.ANSWER_PARAMETERS)),
    Route("POST", "/v1/jobs", jobs.post_job, Access.SUBMIT),
    Route("GET", "/v1/jobs", jobs.get_jobs, Access.READ, jobs.LIST_PARAMETERS),
    Route("GET", "/v1/jobs/{id}", jobs.get_job, Access.READ),
    Route("DELETE", "/v1/jobs/{id}", jobs.delete_job, Access.SUBMIT),
    Route("POST", "/v1/jobs/{id}/tasks/{task}/events", jobs.post_task_event, Access.EXECUTOR),
    Route("POST", "/v1/jobs/{id}/hold", jobcontrols.post_hold, Access.SUBMIT),
    Route("POST", "/v1/jobs/{id}/release", jobcontrols.post_release, Access.SUBMIT),
    Route("POST", "/v1/jobs/{id}/requeue", jobcontrols.post_requeue, Access.SUBMIT),
    Route("POST", "/v1/jobs/{id}/priority", jobcontrols.post_priority, Access.ADMIN),
    Route("GET", "/v1/executor/tasks", jobs.get_executor_tasks, Access.EXECUTOR, ("host",)),
    Route("POST", "/v1/admin/hosts/{id}/{action}", admin.post_admin, Access.ADMIN, admin.PARAMETERS),
    Route("GET", "/v1/prometheus/targets", prometheus.get_prometheus_targets, Access.READ),
    Route("GET", "/metrics", prometheus.get_metrics, Access.READ, pretty=False),
    Route("GET", "/healthz", meta.healthz, Access.PUBLIC),
    Route("GET", "/openapi.json", meta.get_openapi, Access.PUBLIC),
    Route("GET", "/schemas/{name}", meta.get_schema, Access.PUBLIC, pretty=False),
    # the web page's files; the data it shows comes from the routes above, with their access
    Route("GET", "/", page.get_index, Access.PUBLIC, pretty=False),
    Route("GET", "/page/{name}", page.get_page_file, Access.PUBLIC, pretty=False),
)


def add_routes(app: web.Application, routes: tuple[Route, ...] = ROUTES) -> None:
    for route in routes:
        if route.method == "GET":
            app.router.add_get(route.pattern, route.handler)  # and HEAD
        else:
            app.router.add_route(route.method, route.pattern, route.handler)
    app[ROUTE_TABLE] = {route.handler: route for route in routes}
