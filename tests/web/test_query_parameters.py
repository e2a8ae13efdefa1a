"""One rule for query parameters on every route: each route declares the ones
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
    assert answer["detail"]["accepted"] == list(route.accepted), answer
    assert f"this route takes {', '.join(route.accepted) or 'none'}" in answer["error"]


def test_the_glue_tree_takes_the_host_filters(site: InProcessServer) -> None:
    """/v1/glue?state=Paused once answered the whole tree, silently; now it is the tree of those hosts."""
    whole = site.get("/v1/glue").json()
    assert whole["hosts"]
    assert site.get("/v1/glue?state=Paused").json()["hosts"] == []
    ready = site.get("/v1/glue?state=Ready").json()
    assert [h["unique_id"] for h in ready["hosts"]] == [h["unique_id"] for h in whole["hosts"] if h["state"] == "Ready"]
    one = whole["hosts"][0]["unique_id"]
    named = site.get(f"/v1/glue?nodes={one}").json()
    assert [h["unique_id"] for h in named["hosts"]] == [one]
    assert [s["hosts"] for s in named["subclusters"]] == [[one]]  # the subclusters of the chosen hosts alone
    assert site.get(f"/v1/glue?cluster={whole['hosts'][0]['cluster']}").json()["hosts"] == whole["hosts"]
    assert site.get("/v1/glue?cluster=nowhere").json()["hosts"] == []
    assert site.get("/v1/glue?format=xml&state=Ready").status == 200
    assert site.get("/v1/glue?at=0&state=Ready").is_error(400)


def test_declared_parameters_still_work(site: InProcessServer) -> None:
    assert site.get("/v1/nodes?state=Ready&format=json").status == 200
    assert site.get("/v1/glue/hosts?state=Paused").json()["hosts"] == []
    assert site.get("/v1/jobs?state=Queued&limit=5").status == 200


@pytest.mark.parametrize("parameter", ["min_free_processors", "min_free_memory"])
def test_a_number_past_a_float_s_range_is_a_400(site: InProcessServer, parameter: str) -> None:
    # int() read 1 and 4,000 zeros, and math.isfinite() of it raised: a 500 with a traceback
    reply = site.get(f"/v1/nodes?{parameter}=1{'0' * 4000}")
    assert reply.status == 400 and "is not a finite number" in reply.json()["error"], reply.body[:300]
    assert len(reply.body) < 1000


def test_every_route_declares_its_parameters() -> None:
    for route in ROUTES:
        assert isinstance(route.params, tuple), route.path
        assert len(set(route.params)) == len(route.params), route.path


def _matches(pattern: str, path: str) -> bool:
    parts, wanted = pattern.split("/"), path.split("/")
    return len(parts) == len(wanted) and all(p == w or p.startswith("{") for p, w in zip(parts, wanted))
