"""One rule for query parameters on every route (issue 14, item 6): each route declares the ones
it takes, and an unknown one is a 400 that names them, before the handler runs."""

from __future__ import annotations

import pytest

from support.server import InProcessServer, ServerFactory
from infosvc.web.routes import ROUTES


@pytest.fixture
def site(serve_app: ServerFactory) -> InProcessServer:
    server = serve_app(agents=1)
    server.report("h1", server.agent_token())
    return server  # type: ignore[return-value]


@pytest.mark.parametrize("path", ["/v1/glue", "/v1/nodes", "/v1/nodes/h1", "/v1/glue/hosts",
                                  "/v1/glue/hosts/h1", "/v1/jobs", "/v1/prometheus/targets", "/metrics",
                                  "/healthz", "/openapi.json"])
def test_an_unknown_parameter_is_a_400_naming_the_accepted_ones(site: InProcessServer, path: str) -> None:
    reply = site.get(f"{path}?colour=red")
    assert reply.status == 400, (path, reply.status)
    answer = reply.json()
    assert "'colour'" in answer["error"]
    route = next(r for r in ROUTES if r.method == "GET" and _matches(r.path, path))
    assert answer["detail"]["parameter"] == "colour"
    assert answer["detail"]["accepted"] == list(route.params), answer
    assert f"this route takes {', '.join(route.params) or 'none'}" in answer["error"]


def test_the_glue_tree_says_where_its_hosts_are_filtered(site: InProcessServer) -> None:
    reply = site.get("/v1/glue?state=Paused")  # was: the whole tree, silently
    assert reply.status == 400
    assert "/v1/glue/hosts?state=" in reply.json()["detail"]["hint"]
    assert site.get("/v1/glue?format=xml").status == 200


def test_declared_parameters_still_work(site: InProcessServer) -> None:
    assert site.get("/v1/nodes?state=Ready&format=json").status == 200
    assert site.get("/v1/glue/hosts?state=Paused").json()["hosts"] == []
    assert site.get("/v1/jobs?state=Queued&limit=5").status == 200


def test_every_route_declares_its_parameters() -> None:
    for route in ROUTES:
        assert isinstance(route.params, tuple), route.path
        assert len(set(route.params)) == len(route.params), route.path


def _matches(pattern: str, path: str) -> bool:
    parts, wanted = pattern.split("/"), path.split("/")
    return len(parts) == len(wanted) and all(p == w or p.startswith("{") for p, w in zip(parts, wanted))
