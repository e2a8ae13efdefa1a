"""The route table and its one authorizing middleware (infosvc/web/routes.py, auth.py),
in process: the real app over a real SQLite file, served by aiohttp's test server on loopback."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Awaitable, Callable

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from support.documents import node_document
from infosvc.config.site import parse_config
from infosvc.hosts.tokens import Role, Tokens, new_token
from infosvc.web.app import make_app
from infosvc.web.auth import Access
from infosvc.web.keys import AGGREGATOR, ROUTE_TABLE
from infosvc.web.routes import ROUTES

AGENT, ADMIN, SUBMIT = new_token(), new_token(), new_token()


class CountingTokens(Tokens):
    """The real tokens, counting the checks of presented tokens."""

    checked: list[str] = []

    def check(self, token: str) -> tuple[str, Role] | None:
        self.checked.append(token)
        return super().check(token)


def tokens() -> Tokens:
    known = CountingTokens()
    known.checked = []
    known.add(AGENT, Role.AGENT)
    known.add(ADMIN, Role.ADMIN)
    known.add(SUBMIT, Role.SUBMIT)
    return known


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def serve(tmp_path: Path, scenario: Callable[[TestClient[Any, Any], web.Application], Awaitable[None]], *,
          config: dict[str, Any] | None = None, extra: Callable[[web.Application], None] | None = None) -> None:
    async def run() -> None:
        app = make_app(parse_config(config or {}), db=tmp_path / "db.sqlite", tokens=tokens())
        if extra is not None:
            extra(app)
        async with TestClient(TestServer(app)) as client:
            await scenario(client, app)

    asyncio.run(run())


def test_every_route_of_the_app_has_its_access_in_the_table(tmp_path: Path) -> None:
    app = make_app(parse_config({}), db=tmp_path / "db.sqlite")
    table = app[ROUTE_TABLE]
    for resource_route in app.router.routes():
        assert resource_route.handler in table, resource_route
    assert {(r.method, r.path) for r in ROUTES} == {
        (route.method, route.resource.canonical) for route in app.router.routes()
        if route.resource is not None and route.method != "HEAD"}


def test_a_route_added_outside_the_table_is_refused(tmp_path: Path) -> None:
    async def rogue(request: web.Request) -> web.Response:
        return web.json_response({"secret": True})

    async def scenario(client: TestClient[Any, Any], app: web.Application) -> None:
        for headers in ({}, bearer(ADMIN)):
            response = await client.get("/v1/rogue", headers=headers)
            assert response.status == 403
            assert (await response.json())["error"] == "this route has no access rule"

    serve(tmp_path, scenario, extra=lambda app: app.router.add_get("/v1/rogue", rogue))


def test_each_access_admits_whom_it_names(tmp_path: Path) -> None:
    async def scenario(client: TestClient[Any, Any], app: web.Application) -> None:
        # AGENT: no token 401, unknown 401, an admin token 403, the agent's 200.
        doc = node_document("n1.example.org")
        assert (await client.post("/v1/nodes", data=doc)).status == 401
        assert (await client.post("/v1/nodes", data=doc, headers=bearer("nope"))).status == 401
        refused = await client.post("/v1/nodes", data=doc, headers=bearer(ADMIN))
        assert refused.status == 403 and "needs a token of role agent" in (await refused.json())["detail"]
        assert (await client.post("/v1/nodes", data=doc, headers=bearer(AGENT))).status == 200
        # ADMIN: the agent's token is not enough.
        assert (await client.post("/v1/admin/hosts/n1.example.org/pause", headers=bearer(AGENT))).status == 403
        assert (await client.post("/v1/admin/hosts/n1.example.org/pause", headers=bearer(ADMIN))).status == 200
        # READ without read_token_required, and PUBLIC: anyone, and a wrong token is not held against them.
        assert (await client.get("/v1/nodes")).status == 200
        assert (await client.get("/healthz", headers=bearer("nope"))).status == 200
        # Refusals of the report route are counted as refused reports, by reason.
        assert app[AGGREGATOR].rejected == {"unauthorized": 2, "forbidden": 1}

    serve(tmp_path, scenario)


def test_reads_need_a_token_when_the_config_says_so(tmp_path: Path) -> None:
    async def scenario(client: TestClient[Any, Any], app: web.Application) -> None:
        read_routes = [r for r in ROUTES if r.access is Access.READ and r.method == "GET" and "{" not in r.path]
        for route in read_routes:
            assert (await client.get(route.path)).status == 401, route.path
            assert (await client.get(route.path, headers=bearer(SUBMIT))).status == 200, route.path
        assert (await client.get("/openapi.json")).status == 200  # PUBLIC stays open

    serve(tmp_path, scenario, config={"service": {"read_token_required": True}})


def test_a_report_checks_its_token_once(tmp_path: Path) -> None:
    # The middleware checked the token, then Aggregator.ingest checked the same header again.
    async def scenario(client: TestClient[Any, Any], app: web.Application) -> None:
        checked = app[AGGREGATOR].tokens.checked  # type: ignore[attr-defined]
        response = await client.post("/v1/nodes", data=node_document("n2.example.org"), headers=bearer(AGENT))
        assert response.status == 200, await response.text()
        assert checked == [AGENT]

    serve(tmp_path, scenario)


def test_the_aggregates_speak_no_http() -> None:
    # Refusals are kinds, not statuses: the web layer maps them (infosvc/web/errors.py).
    import infosvc.errors as site_errors
    from infosvc.web.errors import STATUS_OF

    kinds = [k for k in vars(site_errors).values() if isinstance(k, type) and issubclass(k, site_errors.Refused)
             and k is not site_errors.Refused]
    assert set(kinds) == set(STATUS_OF)
    assert not hasattr(site_errors.Forbidden("x"), "status")
    below = Path(site_errors.__file__).parent
    packages = [below / "errors.py", *(below / name for name in ("config", "hosts", "queue"))]
    assert all(p.exists() for p in packages)
    speaking = [p for package in packages for p in ([package] if package.is_file() else package.rglob("*.py"))
                if "aiohttp" in p.read_text(encoding="utf-8")]
    assert not speaking
