"""What a schemathesis run against /openapi.json found, each held by a test of its own: a 405 names
the methods allowed (RFC 9110); a JSON job body is documented as the grid job schema, published
under /schemas/; a query's `state` is the life-cycle enum; every status a route can answer (a 400
for any bad query, the 503s of /healthz and of every write) is documented. The run itself is
tests/web/test_schemathesis.py.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from support import ROOT
from support.documents import node_document
from support.server import ServerFactory
from infosvc.store import Report, Store
from infosvc.web.meta import PUBLISHED_SCHEMAS
from infosvc.web.routes import ROUTES

DOCUMENT: dict[str, Any] = json.loads((ROOT / "schemas" / "openapi.json").read_text(encoding="utf-8"))


def operation(path: str, method: str) -> dict[str, Any]:
    found: dict[str, Any] = DOCUMENT["paths"][path][method]
    return found


def response_schema(path: str, method: str, status: str) -> dict[str, Any]:
    response = operation(path, method)["responses"][status]
    if "$ref" in response:
        response = DOCUMENT["components"]["responses"][response["$ref"].rsplit("/", 1)[1]]
    schema: dict[str, Any] = response["content"]["application/json"]["schema"]
    return schema


def valid(body: Any, schema: dict[str, Any]) -> list[str]:
    """Why `body` does not validate against a schema of the document ($refs into it resolved)."""
    registry: Registry[Any] = Registry().with_resource("urn:openapi", DRAFT202012.create_resource(DOCUMENT))
    validator = Draft202012Validator({**schema, "$id": "urn:openapi"} if "$ref" not in schema
                                     else {"$ref": "urn:openapi" + schema["$ref"]}, registry=registry)
    return [error.message for error in validator.iter_errors(body)]


# --- 405: the Allow header -------------------------------------------------------------------

@pytest.mark.parametrize(("method", "path", "allowed"), [
    ("TRACE", "/v1/nodes", {"GET", "HEAD", "POST"}),
    ("PUT", "/v1/jobs/1", {"GET", "HEAD", "DELETE"}),
    ("DELETE", "/healthz", {"GET", "HEAD"}),
    ("PATCH", "/v1/admin/hosts/a/pause", {"POST"}),
])
def test_a_405_names_the_allowed_methods(serve_app: ServerFactory, method: str, path: str,
                                         allowed: set[str]) -> None:
    server = serve_app()
    reply = server.request(method, path, b"", token=server.tokens["admin"])
    assert reply.is_error(405), (reply.status, reply.body)
    assert "allow" in reply.headers, reply.headers
    assert {m.strip() for m in reply.headers["allow"].split(",")} == allowed


# --- request bodies ------------------------------------------------------------------------------

GRID_JOB = {"$ref": "/schemas/gridjob-v2.schema.json"}


@pytest.mark.parametrize("path", ["/v1/match", "/v1/jobs"])
def test_a_json_job_is_documented_as_the_grid_job_schema(path: str) -> None:
    assert operation(path, "post")["requestBody"]["content"]["application/json"]["schema"] == GRID_JOB
    assert "gridjob-v2.schema.json" in PUBLISHED_SCHEMAS


def test_the_grid_job_schema_names_no_missing_route_or_outside_file() -> None:
    text = (ROOT / "schemas" / "gridjob-v2.schema.json").read_text(encoding="utf-8")
    assert "does not exist" not in text and "not exist yet" not in text
    assert "shared/" not in text  # a file of the repository's authors, not of the repository


def test_the_published_grid_job_schema_refuses_what_the_server_refuses(serve_app: ServerFactory) -> None:
    """The schema a client reads at /schemas/ and the server's reader agree on both sides of one field."""
    server = serve_app()
    schema = server.get("/schemas/gridjob-v2.schema.json").json()
    job = {"version": 2, "tasks": [{"id": "t", "definition": {"version": 2, "executable": "/bin/true"}}]}
    wrong = {**job, "priority": 3}
    validator = Draft202012Validator(schema)
    assert validator.is_valid(job) and not validator.is_valid(wrong)
    headers = {"Content-Type": "application/json"}
    assert server.request("POST", "/v1/match", json.dumps(job).encode(), headers=headers).status == 200
    assert server.request("POST", "/v1/match", json.dumps(wrong).encode(), headers=headers).is_error(400)


# --- query parameters ----------------------------------------------------------------------------

def test_state_is_documented_as_the_life_cycle_enum() -> None:
    state = DOCUMENT["components"]["parameters"]["state"]
    assert state["schema"] == {"type": "array", "items": {"$ref": "#/components/schemas/NodeState"}}
    assert state.get("explode", True) and state.get("style", "form") == "form"


def test_every_documented_state_is_accepted_and_another_refused(serve_app: ServerFactory) -> None:
    server = serve_app()
    for state in DOCUMENT["components"]["schemas"]["NodeState"]["enum"]:
        assert server.get(f"/v1/nodes?state={state}").status == 200, state
    assert server.get("/v1/nodes?state=Ready&state=Paused").status == 200
    assert server.get("/v1/nodes?state=Sleeping").is_error(400)


# --- statuses ------------------------------------------------------------------------------------

def test_every_route_that_takes_a_query_documents_its_400() -> None:
    """An unknown query parameter, or a bad `pretty`, is a 400 on every route that takes one."""
    for route in ROUTES:
        responses = operation(route.path, route.method.lower())["responses"]
        if route.accepted:
            assert "400" in responses, (route.method, route.path)


WRITES = [route for route in ROUTES if route.method in ("POST", "DELETE") and route.path != "/v1/match"]


@pytest.mark.parametrize("route", WRITES, ids=[f"{r.method} {r.path}" for r in WRITES])
def test_every_write_documents_the_store_s_503(route: Any) -> None:
    """A write the store could not keep (a full disk, a locked file) is a 503 with Retry-After."""
    assert "503" in operation(route.path, route.method.lower())["responses"]


def _damaged_store(db: Path) -> None:
    """A store of 1,000 hosts, then the pages of the index every report goes through overwritten
    (as tests/store/test_store_integrity.py does): the next report finds the damage."""
    store = Store(db, history_per_host=1)

    async def fill() -> None:
        await asyncio.gather(*(store.add_report(Report(f"h{i:04d}", node_document(f"h{i:04d}"), 1000.0, True))
                               for i in range(1000)))

    asyncio.run(fill())
    store.close()


def _damage_hosts_index(db: Path) -> None:
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        page_size = connection.execute("PRAGMA page_size").fetchone()[0]
        pages = [row[0] for row in connection.execute(
            "SELECT pageno FROM dbstat WHERE name = 'sqlite_autoindex_hosts_1' AND path != '/'")]
    finally:
        connection.close()
    assert pages and 1 not in pages
    with open(db, "r+b") as file:
        for page in pages:
            file.seek((page - 1) * page_size)
            file.write(b"\xa5" * page_size)


def test_the_healthz_503_is_documented_as_it_is_answered(serve_app: ServerFactory) -> None:
    """A damaged store: GET /healthz answers 503 "failing", and its body is the documented one."""
    server = serve_app(start=False)
    _damaged_store(server.db)
    server.start()
    healthy = server.get("/healthz")
    assert not valid(healthy.json(), response_schema("/healthz", "get", "200"))
    _damage_hosts_index(server.db)
    assert server.post_node(node_document("h5000"), server.agent_token()).status == 500
    failing = server.get("/healthz")
    assert failing.status == 503, failing
    assert "503" in operation("/healthz", "get")["responses"]
    assert not valid(failing.json(), response_schema("/healthz", "get", "503"))
    assert valid(healthy.json(), response_schema("/healthz", "get", "503"))  # the two are told apart
    server.stop()
    assert "Traceback" not in server.log.read_text()


# --- what the negative cases found -------------------------------------------------------------

@pytest.mark.parametrize("query", ["pretty=&pretty=yes", "pretty=1&pretty=banana", "pretty=0&pretty=0"])
def test_pretty_is_given_once(serve_app: ServerFactory, query: str) -> None:
    """Only the first value was read, so `?pretty=&pretty=banana` passed as no."""
    reply = serve_app().get(f"/healthz?{query}")
    assert reply.is_error(400) and reply.json()["detail"] == {"parameter": "pretty"}, reply


def test_an_empty_pretty_is_documented_as_no(serve_app: ServerFactory) -> None:
    assert "" in DOCUMENT["components"]["parameters"]["pretty"]["schema"]["enum"]
    reply = serve_app().get("/healthz?pretty=")
    assert reply.status == 200 and reply.body.count(b"\n") == 1


def test_an_admin_names_a_host_that_is_not_empty(serve_app: ServerFactory) -> None:
    """`?host=` was read as the host "" (a 200 listing nothing) instead of a 400."""
    server = serve_app()
    for query in ("", "?host="):
        reply = server.get(f"/v1/executor/tasks{query}", token=server.tokens["admin"])
        assert reply.is_error(400), (query, reply)
    assert server.get("/v1/executor/tasks?host=a.example.org", token=server.tokens["admin"]).status == 200


@pytest.mark.parametrize("query", ["state=", "state=,", "state=Ready&state="])
def test_an_empty_state_is_refused_not_read_as_no_filter(serve_app: ServerFactory, query: str) -> None:
    """`?state=` listed every host, as if no filter were given; the document allows only states."""
    reply = serve_app().get(f"/v1/nodes?{query}")
    assert reply.is_error(400) and reply.json()["detail"] == {"parameter": "state"}, reply
