"""GET /openapi.json: schemas/openapi.json, an OpenAPI 3.1 description of every route, served as it is.

Bodies refer to the project's JSON Schemas by a path on the same server (`/schemas/...`), so the
document is validated here as a client would read it: fetched from a real server, its `$ref`s
resolved against the URL it came from. A route of the app missing from the document (or an
operation documented that the app does not have) fails a test; and what the server answers
validates against what the document says it answers.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from support import ROOT

from support.server import Server, ServerFactory
from infosvc.web.app import make_app
from infosvc.web.meta import PUBLISHED_SCHEMAS
from infosvc.config.site import SiteConfig

DOCUMENT_FILE = ROOT / "schemas" / "openapi.json"
DOCUMENT: dict[str, Any] = json.loads(DOCUMENT_FILE.read_text())
METHODS = ("get", "put", "post", "delete", "patch", "options", "head", "trace")


@pytest.fixture(scope="module")
def server(module_serve_app: ServerFactory) -> Server:
    return module_serve_app()


def app_operations() -> set[tuple[str, str]]:
    """(path template, method) of every route of the app; HEAD comes with each GET in aiohttp."""
    app = make_app(SiteConfig())
    found = set()
    for route in app.router.routes():
        assert route.resource is not None
        if route.method != "HEAD":
            found.add((route.resource.canonical, route.method.lower()))
    return found


def documented_operations() -> set[tuple[str, str]]:
    return {(path, method) for path, item in DOCUMENT["paths"].items() for method in item if method in METHODS}


def test_every_route_is_documented() -> None:
    missing = app_operations() - documented_operations()
    assert not missing, f"routes of make_app() missing from schemas/openapi.json: {sorted(missing)}"


def test_every_declared_query_parameter_is_documented() -> None:
    """The route table's parameters (an unknown one is a 400) are the document's, route by route."""
    from infosvc.web.routes import ROUTES

    components = DOCUMENT["components"]["parameters"]
    for route in ROUTES:
        operation = DOCUMENT["paths"][route.path][route.method.lower()]
        documented = {(components[p["$ref"].rsplit("/", 1)[1]] if "$ref" in p else p)["name"]
                      for p in operation.get("parameters", ())
                      if (components[p["$ref"].rsplit("/", 1)[1]] if "$ref" in p else p)["in"] == "query"}
        assert documented == set(route.accepted), (route.method, route.path, documented ^ set(route.accepted))


def test_every_documented_operation_is_a_route() -> None:
    extra = documented_operations() - app_operations()
    assert not extra, f"schemas/openapi.json documents operations the app does not have: {sorted(extra)}"


def test_path_parameters_match_the_templates() -> None:
    for path, item in DOCUMENT["paths"].items():
        for method, operation in item.items():
            declared = set()
            for parameter in operation.get("parameters", []):
                if "$ref" in parameter:
                    parameter = DOCUMENT["components"]["parameters"][parameter["$ref"].rsplit("/", 1)[1]]
                if parameter["in"] == "path":
                    declared.add(parameter["name"])
            named = {part[1:-1] for part in path.split("/") if part.startswith("{")}
            assert declared == named, (path, method)


def test_every_refusal_is_the_error_body() -> None:
    for name, response in DOCUMENT["components"]["responses"].items():
        assert response["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}, name
    for path, item in DOCUMENT["paths"].items():
        for method, operation in item.items():
            for status, response in operation["responses"].items():
                if (path, status) == ("/healthz", "503"):  # a health answer, "failing", not a refusal
                    continue
                if status.startswith("4") or status.startswith("5"):
                    assert response == {"$ref": f"#/components/responses/E{status}"}, (path, method, status)


def test_served_document_is_the_file(server: Server) -> None:
    reply = server.get("/openapi.json")
    assert reply.status == 200
    assert reply.headers["content-type"].startswith("application/json")
    assert reply.body == DOCUMENT_FILE.read_bytes()


def test_served_document_is_valid_openapi_3_1(server: Server) -> None:
    """openapi-spec-validator, with every $ref (the JSON Schemas too) fetched from the server."""
    validate(server.get("/openapi.json").json(), base_uri=f"{server.url}/openapi.json")


@pytest.mark.parametrize("name", sorted(PUBLISHED_SCHEMAS))
def test_schemas_are_served_as_they_are(server: Server, name: str) -> None:
    reply = server.get(f"/schemas/{name}")
    assert reply.status == 200
    assert reply.headers["content-type"].startswith(PUBLISHED_SCHEMAS[name])
    assert reply.body == (ROOT / "schemas" / name).read_bytes()


@pytest.mark.parametrize("name", ["nope.json", "..%2Fpyproject.toml", "%2E%2E%2Fpyproject.toml"])
def test_only_the_published_schemas_are_served(server: Server, name: str) -> None:
    assert server.get(f"/schemas/{name}").is_error(404)


# --- what the server answers is what the document says ------------------------------------------

BASE = "https://infosvc.test"


def registry() -> Registry:
    """The document at BASE/openapi.json and the JSON Schemas at BASE/schemas/..., as a client sees them."""
    resources = [(f"{BASE}/openapi.json", DRAFT202012.create_resource(DOCUMENT))]
    for name in ("sss-node.schema.json", "glue.schema.json"):
        schema = json.loads((ROOT / "schemas" / name).read_text())
        resource: Resource[Any] = DRAFT202012.create_resource(schema)
        resources += [(f"{BASE}/schemas/{name}", resource), (schema["$id"], resource)]
    return Registry().with_resources(resources)


REGISTRY = registry()


def pointer(*parts: str) -> str:
    return "/".join(part.replace("~", "~0").replace("/", "~1") for part in parts)


def check(reply_body: Any, path: str, method: str, status: str) -> None:
    response = DOCUMENT["paths"][path][method]["responses"][status]
    if "$ref" in response:
        location = f"{BASE}/openapi.json#{response['$ref'][1:]}/content/application~1json/schema"
    else:
        location = f"{BASE}/openapi.json#/" + pointer("paths", path, method, "responses", status,
                                                       "content", "application/json", "schema")
    validator = Draft202012Validator({"$ref": location}, registry=REGISTRY)
    errors = sorted(validator.iter_errors(reply_body), key=str)
    assert not errors, f"{method.upper()} {path} {status}: {errors[0]}"


def test_answers_validate_against_the_document(server: Server) -> None:
    token = server.agent_token()
    post = server.report("oa01.example.org", token)
    check(post.json(), "/v1/nodes", "post", "200")
    check(server.post_node(b"<Node/>", token).json(), "/v1/nodes", "post", "400")
    check(server.post_node(b"<Node/>", None).json(), "/v1/nodes", "post", "401")
    check(server.get("/v1/nodes").json(), "/v1/nodes", "get", "200")
    check(server.get("/v1/nodes?min_free_memory=lots").json(), "/v1/nodes", "get", "400")
    check(server.get("/v1/nodes/oa01.example.org").json(), "/v1/nodes/{id}", "get", "200")
    check(server.get("/v1/nodes/nope").json(), "/v1/nodes/{id}", "get", "404")
    tree = server.get("/v1/glue").json()
    check(tree, "/v1/glue", "get", "200")
    check(server.get("/v1/glue/hosts").json(), "/v1/glue/hosts", "get", "200")
    for kind, key in (("hosts", "hosts"), ("subclusters", "subclusters"), ("clusters", "clusters"),
                      ("computing-elements", "computing_elements")):
        for entity in tree[key]:
            reply = server.get(f"/v1/glue/{kind}/{entity['unique_id']}")
            assert reply.status == 200, (kind, reply.body)
            check(reply.json(), "/v1/glue/{kind}/{id}", "get", "200")
    check(server.admin("oa01.example.org", "pause").json(), "/v1/admin/hosts/{id}/{action}", "post", "200")
    check(server.admin("oa01.example.org", "explode").json(), "/v1/admin/hosts/{id}/{action}", "post", "404")
    check(server.get("/v1/prometheus/targets").json(), "/v1/prometheus/targets", "get", "200")
    check(server.get("/healthz").json(), "/healthz", "get", "200")
