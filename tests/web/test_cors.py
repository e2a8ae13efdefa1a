"""CORS when the site config lists origins (service.cors_origins, infosvc/web/cors.py), on real
servers: an allowed origin's answers, refusals included, carry Access-Control-Allow-Origin, and its
preflight on a path of the route table is a 204 naming that path's methods; any other origin gets
no Access-Control-* header, and its preflight stays the router's 405; "*" lets any origin read;
CORS grants no access a token does not. Without the setting there is no CORS at all
(tests/web/test_security_access.py); the values refused at load are in tests/config/test_siteconfig.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from support.server import Reply, Server, ServerFactory, toml_value
from infosvc.web.auth import Access
from infosvc.web.routes import ROUTES, Route

PORTAL, LOCAL = "https://portal.example.org", "http://localhost:3000"
#: near the configured origins, each a different origin for a browser, and so refused
OTHERS = ("https://evil.example.net", "http://portal.example.org", "https://portal.example.org:8443",
          "https://portal.example.org.evil.net", "https://PORTAL.example.org", "http://localhost:3001", "null")
ASKED_HEADERS = "authorization, content-type"


def configured(factory: ServerFactory, origins: list[str], **service: Any) -> Server:
    """A server of `factory` whose config lists `origins` (support.server writes no lists)."""
    server = factory(start=False)
    lines = ["[service]", f"cors_origins = {json.dumps(origins)}",
             *(f"{key} = {toml_value(value)}" for key, value in service.items())]
    server.config_file.write_text("\n".join(lines) + "\n")
    return server.start()


@pytest.fixture(scope="module")
def site(module_serve_app: ServerFactory) -> Server:
    return configured(module_serve_app, [PORTAL, LOCAL])


def concrete(route: Route) -> str:
    """The route's path with values in it."""
    return (route.path.replace("{id}", "1" if route.path.startswith("/v1/jobs") else "h0.example.org")
            .replace("{task}", "0").replace("{action}", "pause").replace("{kind}", "hosts")
            .replace("{name}", "openapi.json" if route.path.startswith("/schemas") else "page.js"))


#: every path of the route table, with values, and the methods it has (aiohttp answers HEAD with GET)
PATHS: dict[str, set[str]] = {}
for _route in ROUTES:
    PATHS.setdefault(concrete(_route), set()).update({_route.method, "HEAD"} if _route.method == "GET"
                                                      else {_route.method})


def cors_headers(reply: Reply) -> dict[str, str]:
    return {name: value for name, value in reply.headers.items() if name.startswith("access-control-")}


def varies_on_origin(reply: Reply) -> bool:
    return "origin" in [v.strip().lower() for v in reply.headers.get("vary", "").split(",")]


def call(server: Server, route: Route, origin: str | None, **kwargs: Any) -> Reply:
    headers = {"Origin": origin} if origin is not None else {}
    return server.request(route.method, concrete(route), b"" if route.method == "POST" else None,
                          headers=headers, **kwargs)


def preflight(server: Server, path: str, origin: str, method: str = "GET") -> Reply:
    return server.request("OPTIONS", path, headers={"Origin": origin, "Access-Control-Request-Method": method,
                                                    "Access-Control-Request-Headers": ASKED_HEADERS})


def granted_to(reply: Reply, origin: str) -> list[str]:
    """What is wrong with `reply` as an answer to a request from an allowed `origin`."""
    wrong = []
    if reply.headers.get("access-control-allow-origin") != origin:
        wrong.append(f"Access-Control-Allow-Origin {reply.headers.get('access-control-allow-origin')!r}")
    exposed = {h.strip() for h in reply.headers.get("access-control-expose-headers", "").split(",")}
    if not {"Retry-After", "Location", "ETag", "Allow"} <= exposed:
        wrong.append(f"Access-Control-Expose-Headers {exposed}")
    if "access-control-allow-credentials" in reply.headers:
        wrong.append("Access-Control-Allow-Credentials")
    if not varies_on_origin(reply):
        wrong.append(f"Vary {reply.headers.get('vary')!r}")
    return wrong


# --- an allowed origin ----------------------------------------------------------------------------

def test_an_allowed_origin_reads_every_route_and_its_refusals(site: Server) -> None:
    """Every route of the table, called without a token: reads answered, writes refused with
    401, each answer with the headers the browser needs to let the page read it."""
    failures, statuses = [], set()
    for route in ROUTES:
        for origin in (PORTAL, LOCAL):
            reply = call(site, route, origin)
            statuses.add(reply.status)
            failures += [f"{route.method} {concrete(route)} from {origin}: {w}" for w in granted_to(reply, origin)]
        if route.access not in (Access.PUBLIC, Access.READ) and not call(site, route, PORTAL).is_error(401):
            failures.append(f"{route.method} {concrete(route)}: a write without a token was not a 401")
    assert not failures, "\n".join(failures)
    assert {200, 401} <= statuses


@pytest.mark.parametrize("method, path, status", [
    ("GET", "/v1/nodes/nowhere.example.org", 404),
    ("GET", "/v1/nodes?colour=blue", 400),
    ("PUT", "/v1/nodes", 405),
    ("GET", "/v1/no-such-route", 404),
    ("DELETE", "/v1/jobs/1", 401),
])
def test_refusals_carry_the_headers(site: Server, method: str, path: str, status: int) -> None:
    reply = site.request(method, path, headers={"Origin": PORTAL})
    assert reply.is_error(status), (reply.status, reply.body)
    assert granted_to(reply, PORTAL) == []


def test_a_preflight_names_the_methods_of_the_path(site: Server) -> None:
    """Answered without a token, whatever the path's access: a preflight only says what the path
    takes; the request itself is then authorized as any other."""
    failures = []
    for path, methods in PATHS.items():
        for method in sorted(methods - {"HEAD"}):
            reply = preflight(site, path, PORTAL, method)
            answer = {"status": reply.status, "body": reply.body,
                      "methods": {m.strip() for m in reply.headers.get("access-control-allow-methods", "").split(",")},
                      "headers": reply.headers.get("access-control-allow-headers"),
                      "max_age": reply.headers.get("access-control-max-age"),
                      "origin": reply.headers.get("access-control-allow-origin"),
                      "credentials": reply.headers.get("access-control-allow-credentials"),
                      "vary": varies_on_origin(reply)}
            expected = {"status": 204, "body": b"", "methods": methods, "headers": "Authorization, Content-Type",
                        "max_age": "600", "origin": PORTAL, "credentials": None, "vary": True}
            if answer != expected:
                failures.append(f"OPTIONS {path} ({method}): {answer}")
    assert not failures, "\n".join(failures)


def test_only_a_preflight_on_a_path_of_the_table_is_answered(site: Server) -> None:
    """An OPTIONS that is no preflight, or on a path the table has not, is refused as it always was."""
    unknown = preflight(site, "/v1/no-such-route", PORTAL)
    assert unknown.is_error(404) and granted_to(unknown, PORTAL) == []
    plain = site.request("OPTIONS", "/v1/nodes", headers={"Origin": PORTAL})
    assert plain.is_error(405) and plain.headers["allow"] == "GET,HEAD,POST"
    assert granted_to(plain, PORTAL) == []


# --- any other origin -----------------------------------------------------------------------------

def test_other_origins_get_no_cors_header(site: Server) -> None:
    """Each route, and its preflight, from origins near the configured ones: no Access-Control-*
    header, and the preflight is the router's 405, as it is with no Origin at all."""
    found = []
    for route in ROUTES:
        path = concrete(route)
        without = site.request("OPTIONS", path)
        for origin in OTHERS:
            reply, asked = call(site, route, origin), preflight(site, path, origin, route.method)
            for what, answer in ((route.method, reply), ("OPTIONS", asked)):
                if cors_headers(answer):
                    found.append(f"{what} {path} from {origin}: {cors_headers(answer)}")
            if (asked.status, asked.headers.get("allow"), asked.body) != (405, without.headers["allow"], without.body):
                found.append(f"OPTIONS {path} from {origin}: {asked.status} {asked.body[:100]!r}")
            if not varies_on_origin(reply):
                found.append(f"{route.method} {path} from {origin}: no Vary: Origin")
    assert not found, "\n".join(found)


def test_no_origin_no_cors_header(site: Server) -> None:
    """A request without Origin (curl, an agent, the page itself) gets none, but is told the answer varies."""
    reply = site.get("/v1/nodes")
    assert reply.status == 200 and not cors_headers(reply) and varies_on_origin(reply)


# --- "*" and access ----------------------------------------------------------------------------------

def test_any_origin(serve_app: ServerFactory) -> None:
    server = configured(serve_app, ["*"])
    for origin in ("https://anything.example.com", "http://127.0.0.1:5500", "null"):
        reply = server.get("/v1/nodes", headers={"Origin": origin})
        assert reply.status == 200 and granted_to(reply, "*") == [], (origin, reply.headers)
        asked = preflight(server, "/v1/jobs", origin, "POST")
        assert asked.status == 204 and asked.headers["access-control-allow-origin"] == "*"
        assert {m.strip() for m in asked.headers["access-control-allow-methods"].split(",")} == {"GET", "HEAD", "POST"}
        assert "access-control-allow-credentials" not in asked.headers
    assert not cors_headers(server.get("/v1/nodes"))


def test_cors_grants_no_access(serve_app: ServerFactory) -> None:
    """With reads behind a token, an allowed origin's read without one is the 401 it would be
    anyway, which the page can read; with a token it is answered; a preflight needs none."""
    server = configured(serve_app, [PORTAL], read_token_required=True)
    asked = preflight(server, "/v1/nodes", PORTAL)
    assert asked.status == 204 and asked.headers["access-control-allow-origin"] == PORTAL
    for token in (None, "x" * 43):
        refused = server.get("/v1/nodes", headers={"Origin": PORTAL}, token=token)
        assert refused.is_error(401), (token, refused.status, refused.body)
        assert granted_to(refused, PORTAL) == []
    answered = server.get("/v1/nodes", headers={"Origin": PORTAL}, token=server.tokens["admin"])
    assert answered.status == 200 and granted_to(answered, PORTAL) == []
    write = server.request("POST", "/v1/admin/hosts/h0.example.org/pause", headers={"Origin": PORTAL},
                           token=server.tokens["submit"])
    assert write.is_error(403) and granted_to(write, PORTAL) == []
