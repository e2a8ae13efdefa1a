"""Who may write, and what is never shown, each on a real server: every route that writes against
every role (and no token, and an unknown one), with nothing stored by a refusal; an agent token
bound to one host reporting for another; tokens only as digests in the SQLite file and never in
the log (with -v) or an answer; reads behind a token when service.read_token_required; no CORS
header whatever the request's Origin; token files that are wrong said so without their secret.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support import FIXTURES
from support.server import Reply, Server, ServerFactory
from infosvc.hosts.tokens import Role, TokenFileError, Tokens, digest, new_token
from infosvc.web.auth import ROLES, Access
from infosvc.web.routes import ROUTES, Route

EXECUTOR_HOST = "ex0.example.org"
#: who calls: no token, a token the server does not know, or a token of each role
CALLERS = ("none", "unknown", *(role.value for role in Role))
#: roles tests/support/server.py makes no token of, added to the tokens file here (they bind nothing)
EXTRA_ROLES = tuple(role.value for role in Role if role.value not in ("agent", "submit", "admin", "executor"))
WRITES = [route for route in ROUTES if route.access not in (Access.PUBLIC, Access.READ)]


def concrete(route: Route) -> str:
    """The route's path with values in it."""
    return (route.path.replace("{id}", "1" if route.path.startswith("/v1/jobs") else "h0.example.org")
            .replace("{task}", "0").replace("{action}", "pause").replace("{kind}", "hosts"))


def token_of(server: Server, caller: str) -> str | None:
    return {"none": None, "unknown": "x" * 43, "agent": server.tokens["agent0"],
            "executor": server.tokens["exec0"]}.get(caller, server.tokens.get(caller))


def body_for(route: Route) -> bytes:
    if route.path == "/v1/nodes":
        return b"<Node><Id>h9.example.org</Id></Node>"
    if route.path == "/v1/jobs":
        return (FIXTURES / "jobs" / "sss-job.xml").read_bytes()
    return b'{"event": "started"}' if route.path.endswith("/events") else b""


def with_every_role(server: Server) -> Server:
    """`server` (not started) with a token of each role, started."""
    with server.tokens_file.open("a", encoding="utf-8") as tokens:
        for role in EXTRA_ROLES:
            server.tokens[role] = new_token()
            tokens.write(f"{role} {server.tokens[role]}\n")
    return server.start()


@pytest.fixture(scope="module")
def site(module_serve_app: ServerFactory) -> Server:
    return with_every_role(module_serve_app(agents=2, executors={"exec0": EXECUTOR_HOST}, start=False))


def test_every_write_route_is_in_the_matrix() -> None:
    """Every route but reads and public ones needs a token; POST /v1/match is a read (it stores nothing)."""
    assert {(r.method, r.path) for r in ROUTES if r.method != "GET" and r.access is Access.READ} == {
        ("POST", "/v1/match")}
    assert {r.access for r in WRITES} == {Access.AGENT, Access.SUBMIT, Access.EXECUTOR, Access.ADMIN}


@pytest.mark.parametrize("route", WRITES, ids=[f"{r.method} {r.path}" for r in WRITES])
def test_no_write_without_a_token_of_the_right_role(site: Server, route: Route) -> None:
    failures = []
    for caller in CALLERS:
        rows = site.row_counts()
        reply = site.request(route.method, concrete(route), body_for(route) if route.method == "POST" else None,
                             token=token_of(site, caller), headers={"Content-Type": "application/xml"})
        allowed = caller not in ("none", "unknown") and any(role.value == caller for role in ROLES[route.access])
        if caller in ("none", "unknown"):
            if not reply.is_error(401):
                failures.append(f"{caller}: expected 401, got {reply.status} {reply.body[:200]!r}")
        elif not allowed:
            if not (reply.is_error(403) and "token may not do this" in reply.json()["error"]):
                failures.append(f"{caller}: expected the role's 403, got {reply.status} {reply.body[:200]!r}")
        elif reply.status in (401, 403) and "token may not do this" in reply.body.decode():
            failures.append(f"{caller}: refused though its role may: {reply.body[:200]!r}")
        if not allowed and site.row_counts() != rows:
            failures.append(f"{caller}: a refused request changed the store: {rows} -> {site.row_counts()}")
    assert not failures, "\n".join(failures)


def test_a_bound_token_cannot_report_for_another_host(serve_app: ServerFactory) -> None:
    server = serve_app(agents=2, bound={"pinned": "pinned.example.org"})
    pinned = server.tokens["pinned"]
    token = server.agent_token()
    server.report("first.example.org", token)  # bound at first use
    rows = server.row_counts()
    for who, host in ((token, "second.example.org"), (token, "pinned.example.org"), (pinned, "first.example.org"),
                      (pinned, "other.example.org"), (token, "FIRST.example.org.x")):
        reply = server.post_node(f"<Node><Id>{host}</Id></Node>".encode(), who)
        assert reply.is_error(403), (host, reply.status, reply.body)
    assert server.row_counts() == rows
    server.report("pinned.example.org", pinned)
    server.report("FIRST.example.org.", token)  # the same host in another spelling
    assert sorted(server.node_ids()) == ["first.example.org", "pinned.example.org"]


# --- secrets ---------------------------------------------------------------------------------

def leaked(text: bytes, server: Server) -> list[str]:
    """The tokens (and their whole digests) of `server` found in `text`."""
    found = [name for name, token in server.tokens.items() if token.encode() in text]
    found += [f"digest of {name}" for name, token in server.tokens.items() if digest(token).encode() in text]
    return found


def test_tokens_are_kept_hashed_and_never_logged_or_answered(serve: ServerFactory) -> None:
    """A run that uses every token (and presents wrong ones): the SQLite file, its WAL, the log
    (at debug level) and every /v1 answer hold no token; the file holds the agents' digests."""
    server = serve(agents=3, executors={"exec0": EXECUTOR_HOST}, users={"alice": "alice"}, extra_args=("-v",))
    stray = new_token()
    agent = server.agent_token()
    server.report("s1.example.org", agent)
    server.post_node(b"<Node><Id>s2.example.org</Id></Node>", agent)  # refused: bound to s1
    server.post_node(b"<Node><Id>s3.example.org</Id></Node>", stray)  # an unknown token
    server.request("GET", "/v1/nodes", token=f"{stray}\x01")  # a token aiohttp may quote
    job = (FIXTURES / "jobs" / "sss-job.xml").read_bytes()
    for submitter in ("submit", "alice"):
        assert server.request("POST", "/v1/jobs", job, token=server.tokens[submitter]).status == 201
    server.admin("s1.example.org", "pause")
    server.admin("s1.example.org", "pause", token=agent)  # refused: an agent's
    server.get("/v1/executor/tasks", token=server.tokens["exec0"])
    answers = b""
    for path in ("/v1/nodes", "/v1/nodes/s1.example.org", "/v1/nodes/s1.example.org/history", "/v1/glue",
                 "/v1/glue/hosts", "/v1/jobs", "/v1/jobs/1", "/v1/jobs/2", "/v1/prometheus/targets", "/metrics",
                 "/openapi.json", "/healthz", "/v1/nodes?format=xml"):
        reply = server.get(path, token=server.tokens["admin"])
        assert reply.status == 200, (path, reply.status)
        answers += reply.body
    answers += server.get(f"/v1/executor/tasks?host={EXECUTOR_HOST}", token=server.tokens["admin"]).body
    server.tokens["stray"] = stray
    assert not leaked(answers, server)
    server.stop()  # the WAL checkpointed, the log complete
    files = sorted(p for p in server.directory.iterdir() if p.name.startswith(server.db.name))
    stored = b"".join(p.read_bytes() for p in files)
    found = [name for name, token in server.tokens.items() if token.encode() in stored]
    assert not found, f"tokens in clear in {[p.name for p in files]}: {found}"
    assert digest(agent).encode() in stored  # the binding, as its digest
    log = server.log.read_bytes()
    assert b"DEBUG" in log or b"debug" in log.lower()  # -v took effect: the strictest case
    assert not leaked(log, server), log[-2000:]


@pytest.mark.parametrize(("line", "secret_at"), [
    ("{secret} agent", 0),  # the columns swapped
    ("{secret}", 0),  # the role forgotten
    ("agnet {secret}", 1),  # the role misspelt
    ("admin {secret} h1.example.org", 1),
    ("executor {secret}", 1),
    ("agent {secret} not_a_host!", 1),
    ("submit {secret} 1nvalid-user!", 1),
    ("agent {secret}\nagent {secret}", 1),
])
def test_a_wrong_tokens_file_is_said_without_its_secret(tmp_path: Path, line: str, secret_at: int) -> None:
    secret = new_token()
    tokens = tmp_path / "tokens"
    tokens.write_text(line.format(secret=secret) + "\n")
    with pytest.raises(TokenFileError) as refused:
        Tokens.load(tokens)
    assert secret not in str(refused.value) and secret[:16] not in str(refused.value), refused.value
    served = subprocess.run([sys.executable, "-m", "infosvc", "serve", "--tokens", str(tokens), "--db",
                             str(tmp_path / "db.sqlite"), "--listen", "127.0.0.1:0"],
                            capture_output=True, text=True, timeout=60)
    assert served.returncode != 0 and "Traceback" not in served.stderr, served.stderr
    assert secret not in served.stdout + served.stderr, served.stderr


@pytest.mark.parametrize("content", ["{secret}\n{secret}x\n", "{secret} {secret}y\n", "{secret}\x01\n"])
def test_a_wrong_token_file_of_a_command_is_said_without_its_secret(tmp_path: Path, content: str) -> None:
    """The commands' --token-file: two lines made an Authorization header http.client refused,
    quoting it whole in the error."""
    secret = new_token()
    token_file = tmp_path / "token"
    token_file.write_text(content.format(secret=secret))
    done = subprocess.run([sys.executable, "-m", "infosvc", "jobs", "--server", "http://127.0.0.1:9",
                           "--token-file", str(token_file)], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert secret not in done.stdout + done.stderr, done.stderr
    assert str(token_file) in done.stderr, done.stderr


# --- reads behind a token ------------------------------------------------------------------

READS = [route for route in ROUTES if route.access is Access.READ]


def test_reads_need_a_token_when_configured(serve_app: ServerFactory) -> None:
    server = with_every_role(serve_app({"service": {"read_token_required": True}}, agents=2,
                                   executors={"exec0": EXECUTOR_HOST}, start=False))
    server.report("r1.example.org", server.agent_token())
    failures = []
    for route in READS:
        path = concrete(route).replace("h0.example.org", "r1.example.org")
        body = (FIXTURES / "jobs" / "sss-job.xml").read_bytes() if route.method == "POST" else None
        for caller in ("none", "unknown"):
            reply = server.request(route.method, path, body, token=token_of(server, caller))
            if not reply.is_error(401):
                failures.append(f"{route.method} {path} {caller}: {reply.status}")
        for caller in CALLERS[2:]:
            reply = server.request(route.method, path, body, token=token_of(server, caller))
            if reply.status in (401, 403):
                failures.append(f"{route.method} {path} {caller}: {reply.status} {reply.body[:120]!r}")
    for route in (r for r in ROUTES if r.access is Access.PUBLIC):
        path = route.path.replace("{name}", "openapi.json" if route.path.startswith("/schemas") else "app.js")
        reply = server.get(path)
        if reply.status in (401, 403):
            failures.append(f"public {path}: {reply.status}")
    assert not failures, "\n".join(failures)


def test_reads_need_no_token_by_default(site: Server) -> None:
    for route in READS:
        if route.method == "GET":
            assert site.get(concrete(route)).status not in (401, 403), route.path


# --- CORS --------------------------------------------------------------------------------------

def cors_headers(reply: Reply) -> list[str]:
    return [name for name in reply.headers if name.startswith("access-control-")]


def test_no_cors_header_whatever_the_origin(site: Server) -> None:
    """No Access-Control-Allow-Origin: a page of another origin cannot read the API with a
    visitor's browser (the web page at / is of the same origin and needs none)."""
    origin = {"Origin": "https://evil.example.net"}
    found = []
    for route in ROUTES:
        path = concrete(route).replace("{name}", "openapi.json")
        reply = site.request(route.method, path, b"" if route.method == "POST" else None, headers=origin)
        preflight = site.request("OPTIONS", path, headers={**origin, "Access-Control-Request-Method": route.method,
                                                           "Access-Control-Request-Headers": "authorization"})
        for what, answer in ((route.method, reply), ("OPTIONS", preflight)):
            if cors_headers(answer):
                found.append(f"{what} {path}: {cors_headers(answer)}")
        if preflight.status < 400:
            found.append(f"OPTIONS {path} answered {preflight.status}")
    assert not found, "\n".join(found)
    assert json.loads(site.get("/healthz", headers=origin).body)["status"] == "ok"
