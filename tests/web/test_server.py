"""The server over HTTP on loopback, with real SQLite files: ingest, tokens, limits, bad input,
filters, the node life cycle, admin actions, history (the app served in process), and restarts
(kill -9 included) of `infosvc serve` itself."""

from __future__ import annotations

import gzip
import sqlite3
import http.client
import json
import socket
import threading
import time
from pathlib import Path
import zlib
from typing import Any, Iterator
from urllib.parse import quote
from xml.etree import ElementTree

import pytest

from support.documents import node_document

from support.server import Server, ServerFactory, request, wait_for
from infosvc.codec.node_xml import parse_node
from infosvc.store import MIGRATIONS
from infosvc.hosts.tokens import digest

GLUE_NS = "{urn:infosvc:glue:ce:1.1}"
MAX_BODY = 4096
BODY_TIMEOUT = 1.0


def glue_hosts(server: Server, query: str = "") -> dict[str, dict[str, Any]]:
    """GET /v1/glue/hosts (JSON) as host id -> host object, in the order served."""
    reply = server.get("/v1/glue/hosts" + (f"?{query}" if query else ""))
    assert reply.status == 200, (reply.status, reply.body)
    return {host["unique_id"]: host for host in reply.json()["hosts"]}


def glue_tree(server: Server) -> dict[str, Any]:
    reply = server.get("/v1/glue")
    assert reply.status == 200, (reply.status, reply.body)
    tree: dict[str, Any] = reply.json()
    return tree


def ce_free_cpus(server: Server) -> int:
    (ce,) = glue_tree(server)["computing_elements"]
    return int(ce["state"]["free_cpus"])


def sequence_of(document: bytes) -> int:
    value = parse_node(document).extension("Sequence", "Test")
    assert value is not None
    return int(value)


# --- one server for most tests of this module ------------------------------------------------

@pytest.fixture(scope="module")
def shared(module_serve_app: ServerFactory) -> Server:
    return module_serve_app({"service": {"max_body_bytes": MAX_BODY, "body_timeout_seconds": BODY_TIMEOUT},
                         "store": {"history_per_host": 3}},
                        agents=24, bound={"pinned": "pinned-host"})


def test_report_is_stored_and_read_back_as_json_and_xml(shared: Server) -> None:
    token = shared.agent_token()
    reply = shared.post_node(node_document("basic.example.org", features=("BigMem",), state="Busy"), token)
    assert reply.status == 200
    assert reply.json() == {"host": "basic.example.org", "state": "Ready"}

    node = shared.get("/v1/nodes/basic.example.org").json()
    assert node["id"] == "basic.example.org" and node["features"] == ["BigMem"]
    # the SSS State is the agent's word; the life-cycle state is published beside it
    assert (node["state"], node["life_cycle"], node["paused"]) == ("Busy", "Ready", False)
    assert node["reported_at"].endswith("Z")
    assert "basic.example.org" in shared.node_ids()

    for how in ({"headers": {"Accept": "application/xml"}}, {"query": "?format=xml"}):
        path = "/v1/nodes/basic.example.org" + str(how.get("query", ""))
        reply = shared.get(path, headers=how.get("headers"))  # type: ignore[arg-type]
        assert reply.status == 200 and reply.headers["content-type"].startswith("application/xml")
        parsed = parse_node(reply.body)  # a valid SSS Node document
        assert parsed.id == "basic.example.org" and parsed.state == "Busy"  # SSS renderings carry the SSS State

    listing = ElementTree.fromstring(shared.get("/v1/nodes?format=xml").body)
    assert listing.tag == "Nodes"
    states = {n.findtext("Id"): n.findtext("State") for n in listing.findall("Node")}
    assert states["basic.example.org"] == "Busy"

    # in the SQLite file: the newest document, and one history row
    (row,) = shared.sql("SELECT document, approved, paused FROM hosts WHERE id = ?", "basic.example.org")
    assert parse_node(row[0]).features == ["BigMem"] and row[1:] == (1, 0)
    assert shared.sql("SELECT count(*) FROM reports WHERE host_id = ?", "basic.example.org") == [(1,)]
    assert shared.sql("PRAGMA journal_mode") == [("wal",)]
    assert shared.sql("PRAGMA user_version") == [(len(MIGRATIONS),)]


def test_unknown_node_and_route(shared: Server) -> None:
    assert shared.get("/v1/nodes/no-such-host").is_error(404)
    assert shared.get("/v1/nothing-here").is_error(404)
    assert shared.request("DELETE", "/v1/nodes").is_error(405)


@pytest.mark.parametrize("authorization", [None, "", "Bearer", "Bearer ", "Bearer not-a-known-token-at-all",
                                           "Basic dXNlcjpwYXNz", "Basic {agent}", "{agent}",
                                           "Bearer {agent}x"])
def test_missing_or_unknown_token_is_401(shared: Server, authorization: str | None) -> None:
    before = shared.row_counts()
    headers = {} if authorization is None else {
        "Authorization": authorization.format(agent=shared.tokens["agent23"])}
    reply = shared.post_node(node_document("intruder"), None, headers=headers)
    assert reply.is_error(401), (reply.status, reply.body)
    assert shared.row_counts() == before
    assert shared.get("/v1/nodes/intruder").status == 404


def test_bearer_scheme_is_case_insensitive(shared: Server) -> None:
    token = shared.agent_token()
    reply = shared.post_node(node_document("lower-case"), None, headers={"Authorization": f"bearer  {token} "})
    assert reply.status == 200, reply.body


@pytest.mark.parametrize("role", ["submit", "admin"])
def test_other_roles_may_not_report(shared: Server, role: str) -> None:
    before = shared.row_counts()
    reply = shared.post_node(node_document(f"by-{role}"), shared.tokens[role])
    assert reply.is_error(403)
    assert role in reply.json()["error"]
    assert shared.row_counts() == before


def test_token_is_bound_to_its_host_on_first_use(shared: Server) -> None:
    first, second = shared.agent_token(), shared.agent_token()
    shared.report("bind-a", first)
    shared.report("bind-a", first)  # again: fine
    before = shared.row_counts()
    refused = shared.post_node(node_document("bind-b"), first)  # the same token for another host
    assert refused.is_error(403) and "bind-a" in refused.json()["error"]
    refused = shared.post_node(node_document("bind-a"), second)  # another token for a bound host
    assert refused.is_error(403) and "another token" in refused.json()["error"]
    assert shared.row_counts() == before
    assert shared.get("/v1/nodes/bind-b").status == 404
    shared.report("bind-b", second)  # the second token is still free to bind to a host of its own
    bindings = dict(shared.sql("SELECT host_id, token_hash FROM token_bindings WHERE host_id LIKE 'bind-%'"))
    # stored as digests only: the tokens themselves are nowhere in the SQLite files
    assert bindings == {"bind-a": digest(first), "bind-b": digest(second)}
    files = b"".join(path.read_bytes() for path in shared.db.parent.glob(shared.db.name + "*"))
    assert first.encode() not in files and second.encode() not in files


def test_host_column_in_tokens_file_prebinds(shared: Server) -> None:
    other = shared.agent_token()
    assert shared.post_node(node_document("pinned-host"), other).is_error(403)
    assert shared.post_node(node_document("not-pinned"), shared.tokens["pinned"]).is_error(403)
    shared.report("pinned-host", shared.tokens["pinned"])
    assert shared.state_of("pinned-host") == "Ready"
    shared.report("not-pinned", other)  # `other` was refused above and is still unbound


def test_body_over_the_limit_by_content_length_is_413(shared: Server) -> None:
    before, listing = shared.row_counts(), shared.get("/v1/nodes").body
    padding = tuple(f"Feature{i:05d}" for i in range(MAX_BODY // 10))
    document = node_document("too-big", features=padding)
    assert len(document) > MAX_BODY
    reply = shared.post_node(document, shared.tokens["agent23"])
    assert reply.is_error(413), (reply.status, reply.body)
    assert shared.row_counts() == before and shared.get("/v1/nodes").body == listing


def test_body_over_the_limit_chunked_is_413(shared: Server) -> None:
    before = shared.row_counts()
    token = shared.agent_token()
    document = node_document("too-big-chunked", features=tuple(f"F{i:05d}" for i in range(MAX_BODY // 6)))
    assert len(document) > MAX_BODY

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(document), 512):
            yield document[start:start + 512]

    connection = http.client.HTTPConnection("127.0.0.1", shared.port, timeout=15)
    try:
        connection.request("POST", "/v1/nodes", body=chunks(), encode_chunked=True,
                           headers={"Authorization": f"Bearer {token}", "Content-Type": "application/xml",
                                    "Transfer-Encoding": "chunked"})
        response = connection.getresponse()
        status, body = response.status, response.read()
    finally:
        connection.close()
    assert status == 413, body
    assert set(json.loads(body)) == {"error", "detail"}
    assert shared.row_counts() == before
    # the token was not bound by the refused report
    shared.report("chunked-ok", token)


def raw_post_head(port: int, token: str, length: int) -> bytes:
    return (f"POST /v1/nodes HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/xml\r\nContent-Length: {length}\r\n\r\n").encode()


def read_all(sock: socket.socket, timeout: float) -> bytes:
    """What the server sends until it closes, or until it has sent a whole answer."""
    sock.settimeout(timeout)
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk
        head, sep, body = data.partition(b"\r\n\r\n")
        if sep:
            length = [int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")]
            if length and len(body) >= length[0]:
                return data


def test_a_stalled_match_body_is_cut_off(shared: Server) -> None:
    # POST /v1/match is open to readers (no token by default): without the body timeout a client
    # could hold a connection, and its request, for ever.
    sock = socket.create_connection(("127.0.0.1", shared.port), timeout=10)
    try:
        sock.sendall(f"POST /v1/match HTTP/1.1\r\nHost: 127.0.0.1:{shared.port}\r\n"
                     "Content-Type: application/xml\r\nContent-Length: 1000\r\n\r\n<Job>".encode())
        started = time.monotonic()
        answer = read_all(sock, timeout=BODY_TIMEOUT + 10)
        elapsed = time.monotonic() - started
    finally:
        sock.close()
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert set(json.loads(answer.partition(b"\r\n\r\n")[2])) == {"error", "detail"}
    assert BODY_TIMEOUT * 0.9 <= elapsed < BODY_TIMEOUT + 5


@pytest.mark.parametrize("trickle", [False, True], ids=["stalled", "trickling"])
def test_slow_body_is_cut_off_and_others_are_served(shared: Server, trickle: bool) -> None:
    host = f"slow-{'trickle' if trickle else 'stall'}"
    token = shared.agent_token()
    document = node_document(host)
    before = shared.row_counts()
    sock = socket.create_connection(("127.0.0.1", shared.port), timeout=10)
    stop = threading.Event()
    try:
        sock.sendall(raw_post_head(shared.port, token, len(document)) + document[:100])
        started = time.monotonic()

        def dribble() -> None:  # a byte every 0.1 s: each arrives in time, the whole body never does
            for i in range(100, len(document) - 1):
                if stop.wait(0.1):
                    return
                try:
                    sock.sendall(document[i:i + 1])
                except OSError:
                    return

        if trickle:
            threading.Thread(target=dribble, daemon=True).start()
        # Meanwhile the server serves others, at once.
        other = shared.agent_token()
        t0 = time.monotonic()
        shared.report(f"{host}-neighbour", other)
        assert shared.get("/healthz").status == 200
        assert time.monotonic() - t0 < BODY_TIMEOUT
        answer = read_all(sock, timeout=BODY_TIMEOUT + 10)
        elapsed = time.monotonic() - started
    finally:
        stop.set()
        sock.close()
    # 408 with the JSON error, or the connection closed; either way not before the timeout
    assert answer == b"" or answer.startswith(b"HTTP/1.1 408"), answer
    if answer:
        assert set(json.loads(answer.partition(b"\r\n\r\n")[2])) == {"error", "detail"}
    assert BODY_TIMEOUT * 0.9 <= elapsed < BODY_TIMEOUT + 5
    assert shared.get(f"/v1/nodes/{host}").status == 404
    after = shared.row_counts()
    assert after["reports"] == before["reports"] + 1 and after["hosts"] == before["hosts"] + 1  # the neighbour


def test_compressed_bodies(shared: Server) -> None:
    token = shared.agent_token()
    reply = shared.post_node(gzip.compress(node_document("gzipped")), token, headers={"Content-Encoding": "gzip"})
    assert reply.status == 200, reply.body
    before = shared.row_counts()
    bomb = gzip.compress(b"<Node><Id>gzipped</Id><Description>" + b"a" * 2_000_000 + b"</Description></Node>")
    assert len(bomb) < MAX_BODY
    assert shared.post_node(bomb, token, headers={"Content-Encoding": "gzip"}).is_error(413)
    assert shared.post_node(b"not gzip at all", token, headers={"Content-Encoding": "gzip"}).is_error(400)
    # a stream cut short fails in aiohttp's parser, which answers 400 itself (in text/plain, not JSON)
    cut = shared.post_node(zlib.compress(b"<Node>")[:-3], token, headers={"Content-Encoding": "deflate"})
    assert cut.status == 400
    assert shared.row_counts() == before


def test_client_hanging_up_mid_body_is_no_server_error(shared: Server) -> None:
    before = shared.row_counts()
    sock = socket.create_connection(("127.0.0.1", shared.port), timeout=10)
    try:
        sock.sendall(raw_post_head(shared.port, shared.tokens["agent22"], 500) + b"<Node><Id>gone</Id>")
        sock.shutdown(socket.SHUT_WR)
        read_all(sock, timeout=10)
    finally:
        sock.close()
    assert shared.get("/healthz").status == 200
    assert shared.row_counts() == before
    # (and no "unhandled error" in the server's log: the fixtures check every log at the end)


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE Node [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<Node><Id>laughs</Id><Description>&lol9;</Description></Node>
"""

BAD_DOCUMENTS = {
    "malformed": b"<Node><Id>bad</Id><Name>unclosed</Node>",
    "truncated": node_document("bad")[:-20],
    "billion-laughs": BILLION_LAUGHS,
    "external-entity": b'<?xml version="1.0"?><!DOCTYPE Node [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
                       b"<Node><Id>&x;</Id></Node>",
    "doctype-utf16": '<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE Node [<!ENTITY a "bad">]>'
                     "<Node><Id>&a;</Id></Node>".encode("utf-16"),
    "wrong-root": b"<Job><Id>bad</Id></Job>",
    "namespaced-root": b'<Node xmlns="urn:other"><Id>bad</Id></Node>',
    "no-id": b"<Node><Name>bad</Name></Node>",
    "two-ids": b"<Node><Id>bad</Id><Id>worse</Id></Node>",
    "blank-id": b"<Node><Id>   </Id></Node>",
    "two-names": b"<Node><Id>bad</Id><Name>a</Name><Name>b</Name></Node>",
    "processors-not-a-number": b"<Node><Id>bad</Id><Configured><Processors>many</Processors></Configured></Node>",
    "negative-memory": b"<Node><Id>bad</Id><Available><Memory>-5</Memory></Available></Node>",
    "nan-memory": b"<Node><Id>bad</Id><Available><Memory>NaN</Memory></Available></Node>",
    "unknown-element": b"<Node><Id>bad</Id><Color>red</Color></Node>",
    "blank-extension-name": b'<Node><Id>bad</Id><Extension name="  ">x</Extension></Node>',
    "resource-without-name": b"<Node><Id>bad</Id><Configured><Resource>1</Resource></Configured></Node>",
    "empty": b"",
    "blank": b"  \n\t ",
    "binary-garbage": bytes(range(256)) * 4,
    "latin1-as-utf8": b"<Node><Id>caf\xe9</Id></Node>",
    "unknown-encoding": b'<?xml version="1.0" encoding="no-such-codec"?><Node><Id>bad</Id></Node>',
    "json-instead": b'{"id": "bad"}',
    "too-deep": b"<Node><Id>bad</Id>" + b"<a>" * 300 + b"</a>" * 300 + b"</Node>",
}


@pytest.mark.parametrize("case", sorted(BAD_DOCUMENTS))
def test_bad_input_is_400_and_changes_nothing(shared: Server, case: str) -> None:
    token = shared.tokens["agent22"]  # never bound: a refused report must not bind it either
    before, listing = shared.row_counts(), shared.get("/v1/nodes").body
    reply = shared.post_node(BAD_DOCUMENTS[case], token)
    assert reply.is_error(400), (reply.status, reply.body)
    error = reply.json()
    assert isinstance(error["error"], str) and error["detail"]
    assert shared.row_counts() == before
    assert shared.get("/v1/nodes").body == listing
    assert shared.get("/v1/nodes/bad").status == 404


def test_bad_input_detail_says_where(shared: Server) -> None:
    reply = shared.post_node(b"<Node>\n<Id>bad</Id>\n<Configured><Processors>many</Processors></Configured>\n</Node>",
                             shared.tokens["agent22"])
    assert reply.is_error(400)
    (first, *_) = reply.json()["detail"]
    assert first["element"] == "Processors" and first["line"] == 3


def test_odd_but_valid_documents_never_cause_a_5xx(shared: Server) -> None:
    """Units are free text in SSS and numbers unbounded: what the schema lets in must not break reads."""
    odd = {
        "odd-units": b'<Node><Id>odd-units</Id><Configured><Memory units="furlongs">100</Memory></Configured>'
                     b'<Available><Memory units="furlongs">50</Memory><Processors>2</Processors></Available></Node>',
        "odd-huge": b'<Node><Id>odd-huge</Id><Configured><Processors>99999999999999999999999</Processors>'
                    b'<Memory units="Doggabyte">1e300</Memory></Configured>'
                    b'<Available><Memory units="Doggabyte">1e300</Memory></Available></Node>',
    }
    for host, document in odd.items():
        reply = shared.post_node(document, shared.agent_token())
        assert reply.status in (200, 400), (host, reply.status, reply.body)
        if reply.status == 400:
            assert reply.is_error(400)
    for path in ("/v1/nodes", "/v1/nodes?min_free_memory=1", "/v1/nodes?min_free_processors=1", "/v1/glue",
                 "/v1/glue?format=xml", "/v1/glue/hosts?min_free_memory=1", "/v1/nodes/odd-units",
                 "/v1/glue/hosts/odd-units", "/v1/glue/hosts/odd-huge?format=xml"):
        reply = shared.get(path)
        assert reply.status in (200, 404), (path, reply.status, reply.body)
    # a size in units that are no size counts as no free memory
    assert "odd-units" not in shared.node_ids("min_free_memory=1")


BAD_QUERIES = [
    ("bogus=1", "bogus"),
    ("state=Sleeping", "state"),
    ("state=Ready,Asleep", "state"),
    ("min_free_processors=abc", "min_free_processors"),
    ("min_free_processors=-1", "min_free_processors"),
    ("min_free_processors=1.5", "min_free_processors"),
    ("min_free_memory=lots", "min_free_memory"),
    ("min_free_memory=-0.5", "min_free_memory"),
    ("min_free_memory=nan", "min_free_memory"),
    ("min_free_memory=inf", "min_free_memory"),
    ("min_free_memory=1&min_free_memory=2", "min_free_memory"),
    ("os=Linux&os=BSD", "os"),
    ("nodes=node[1-", "nodes"),
    ("nodes=node[5-1]", "nodes"),
    ("nodes=a,,b", "nodes"),
    ("nodes=" + quote("@nosuchsource:group"), "nodes"),
    ("nodes=" + quote("x[1-1000000000]"), "nodes"),
    ("format=yaml", "format"),
]


@pytest.mark.parametrize("path", ["/v1/nodes", "/v1/glue/hosts"])
@pytest.mark.parametrize("query,parameter", BAD_QUERIES, ids=[q for q, _ in BAD_QUERIES])
def test_bad_query_is_400_naming_the_parameter(shared: Server, path: str, query: str, parameter: str) -> None:
    reply = shared.get(f"{path}?{query}")
    assert reply.is_error(400), (reply.status, reply.body)
    body = reply.json()
    assert parameter in body["error"]
    assert body["detail"]["parameter"] == parameter


@pytest.mark.parametrize("path", ["/v1/nodes", "/v1/glue/hosts"])
@pytest.mark.parametrize("group", ["@x';touch {flag};'", "a,@local:x';touch {flag};'", "@*"])
def test_nodeset_groups_are_refused_and_never_resolved(shared: Server, tmp_path: Path, path: str, group: str) -> None:
    # ClusterShell's stock groups.conf (installed with it, under .venv/etc) has a `local` source
    # that runs a shell command holding the group name: a group in a query ran commands as the
    # server's user until groups were refused (infosvc/model/nodeset.py).
    flag = tmp_path / "ran"
    reply = shared.get(f"{path}?nodes=" + quote(group.format(flag=flag)))
    assert reply.is_error(400), (reply.status, reply.body)
    assert "groups (@name) are not supported" in reply.json()["error"]
    assert "sed" not in reply.body.decode()  # no command line of a group source in the answer
    time.sleep(0.2)
    assert not flag.exists()


def test_clustershell_groups_resolve_nowhere_once_infosvc_is_imported(tmp_path: Path) -> None:
    from ClusterShell.NodeSet import NodeSet
    from ClusterShell.NodeUtils import GroupResolverError

    import infosvc.model.nodeset  # noqa: F401 - importing it is what replaces the standard resolver

    flag = tmp_path / "ran"
    with pytest.raises(GroupResolverError):
        NodeSet(f"@x';touch {flag};'")
    with pytest.raises(GroupResolverError):
        _ = f"@x';touch {flag};'" in NodeSet("a[1-2]")
    assert not flag.exists()


@pytest.mark.parametrize("expression,host", [
    ("n[1-10000]-[1-10000]", "n5000-7"),  # 10^8 names in two dimensions
    ("n[1-100]-[1-100],n[5-200]-[3-4]", "n150-3"),  # n-dimensional terms ClusterShell is slow to fold
    ("m[4000000-4099999]", "m4000500"),  # the most names a filter's ranges may write out
])
def test_large_nodesets_are_answered_quickly(shared: Server, expression: str, host: str) -> None:
    shared.report(host, shared.agent_token())
    started = time.monotonic()
    reply = shared.get("/v1/nodes?nodes=" + quote(expression), timeout=10)
    assert reply.status == 200, reply.body
    assert [n["id"] for n in reply.json()] == [host]
    assert list(glue_hosts(shared, "nodes=" + quote(expression))) == [host]
    assert time.monotonic() - started < 3


def test_history_is_bounded(shared: Server) -> None:
    token = shared.agent_token()
    documents = [node_document("historic", sequence=i) for i in range(7)]
    for document in documents:
        assert shared.post_node(document, token).status == 200
    rows = shared.sql("SELECT document FROM reports WHERE host_id = ? ORDER BY seq", "historic")
    assert [row[0] for row in rows] == documents[-3:]  # history_per_host = 3, the newest kept in order
    assert shared.sql("SELECT document FROM hosts WHERE id = ?", "historic") == [(documents[-1],)]
    node = shared.get("/v1/nodes/historic").json()
    assert {"name": "Sequence", "type": "Test", "value": "6"} in node["extensions"]


# --- filters -----------------------------------------------------------------------------------

FLEET = {
    # host: (report keywords, approved, paused)
    "fa01": (dict(processors=8, free_processors=8, memory_mb=32768, free_memory_mb=16384, features=("BigMem", "IB")),
             True, False),
    "fa02": (dict(processors=8, free_processors=2, memory_mb=16384, free_memory_mb=4096, features=("IB",)),
             True, False),
    "fa03": (dict(processors=16, free_processors=16, memory_mb=65536, free_memory_mb=60000, features=("GPU",),
                  arch="aarch64", os_name="Ubuntu", os_release="22.04", model="Neoverse"), True, False),
    "fa04": (dict(processors=4, free_processors=4, memory_mb=8192, free_memory_mb=8000, opsys="FreeBSD",
                  arch="amd64", os_name="FreeBSD", os_release="14.0"), True, True),
    "fa10": (dict(processors=32, free_processors=32, memory_mb=16384, free_memory_mb=1024, features=("BigMem",)),
             False, False),
}

FILTERS = [
    ("", ["fa01", "fa02", "fa03", "fa04", "fa10"]),
    ("state=Ready", ["fa01", "fa02", "fa03"]),
    ("state=ready,PAUSED", ["fa01", "fa02", "fa03", "fa04"]),
    ("state=Pending", ["fa10"]),
    ("state=Pending&state=Paused", ["fa04", "fa10"]),
    ("state=Unreachable", []),
    ("feature=IB", ["fa01", "fa02"]),
    ("feature=BigMem", ["fa01", "fa10"]),
    ("feature=BigMem,IB", ["fa01"]),
    ("feature=BigMem&feature=IB", ["fa01"]),
    ("feature=NoSuch", []),
    ("min_free_processors=0", ["fa01", "fa02", "fa03", "fa04", "fa10"]),
    ("min_free_processors=2", ["fa01", "fa02", "fa03"]),
    ("min_free_processors=4", ["fa01", "fa03"]),  # fa04 Paused and fa10 Pending have none free
    ("min_free_processors=16", ["fa03"]),
    ("min_free_processors=17", []),
    ("min_free_memory=8000", ["fa01", "fa03", "fa04"]),
    ("min_free_memory=16384.5", ["fa03"]),
    ("os=linux", ["fa01", "fa02", "fa03", "fa10"]),
    ("os=FreeBSD", ["fa04"]),
    ("os=ubuntu", ["fa03"]),
    ("os=" + quote("Rocky Linux"), ["fa01", "fa02", "fa10"]),
    ("arch=X86_64", ["fa01", "fa02", "fa10"]),
    ("arch=aarch64", ["fa03"]),
    ("arch=sparc", []),
    ("nodes=" + quote("fa[02-03]"), ["fa02", "fa03"]),
    ("nodes=" + quote("fa[10,01]"), ["fa01", "fa10"]),
    ("nodes=" + quote("fa[01-04]!fa02"), ["fa01", "fa03", "fa04"]),
    ("nodes=" + quote("zz[1-3]"), []),
    ("nodes=" + quote("fa[01-99]"), ["fa01", "fa02", "fa03", "fa04", "fa10"]),  # more names than hosts
    ("state=Ready&feature=IB&min_free_processors=4", ["fa01"]),
    ("nodes=" + quote("fa[01-10]") + "&arch=x86_64&min_free_memory=1024", ["fa01", "fa02", "fa10"]),
    ("os=linux&min_free_memory=5000&state=Ready", ["fa01", "fa03"]),
]


@pytest.fixture(scope="module")
def fleet(module_serve_app: ServerFactory) -> Server:
    server = module_serve_app({"lifecycle": {"require_approval": True}}, agents=len(FLEET))
    for host, (keywords, approved, paused) in FLEET.items():
        reply = server.report(host, server.agent_token(), **keywords)
        assert reply.json()["state"] == "Pending"
        if approved:
            assert server.admin(host, "approve").json() == {"host": host, "state": "Ready"}
        if paused:
            assert server.admin(host, "pause").json() == {"host": host, "state": "Paused"}
    return server


@pytest.mark.parametrize("query,expected", FILTERS, ids=[q or "none" for q, _ in FILTERS])
def test_filters_on_nodes_and_glue_hosts(fleet: Server, query: str, expected: list[str]) -> None:
    ordered = "nodes=" in query  # then the answer comes in NodeSet order
    nodes = fleet.node_ids(query)
    hosts = list(glue_hosts(fleet, query))
    if ordered:
        assert nodes == expected and hosts == expected
    else:
        assert sorted(nodes) == expected and sorted(hosts) == expected
    xml = fleet.get("/v1/nodes?" + (f"{query}&" if query else "") + "format=xml")
    assert sorted(n.findtext("Id") or "" for n in ElementTree.fromstring(xml.body).findall("Node")) == sorted(expected)
    glue_xml = fleet.get("/v1/glue/hosts?" + (f"{query}&" if query else "") + "format=xml")
    assert glue_xml.status == 200 and glue_xml.headers["content-type"].startswith("application/xml")
    found = [h.findtext(f"{GLUE_NS}UniqueID") for h in ElementTree.fromstring(glue_xml.body).findall(f"{GLUE_NS}Host")]
    assert sorted(h or "" for h in found) == sorted(expected)


def test_fleet_states_in_glue(fleet: Server) -> None:
    hosts = glue_hosts(fleet)
    assert {h: hosts[h]["state"] for h in hosts} == {"fa01": "Ready", "fa02": "Ready", "fa03": "Ready",
                                                     "fa04": "Paused", "fa10": "Pending"}
    assert hosts["fa04"]["free_cpus"] == 0 and hosts["fa10"]["free_cpus"] == 0
    assert ce_free_cpus(fleet) == 8 + 2 + 16  # Ready hosts only


# --- life cycle and admin ----------------------------------------------------------------------

def test_approval_pause_resume(serve_app: ServerFactory) -> None:
    server = serve_app({"lifecycle": {"require_approval": True}})
    token = server.agent_token()
    assert server.report("newbie", token, processors=6).json()["state"] == "Pending"
    assert server.report("newbie", token, processors=6).json()["state"] == "Pending"  # reporting does not approve
    assert server.state_of("newbie") == "Pending"
    assert glue_hosts(server)["newbie"]["state"] == "Pending" and ce_free_cpus(server) == 0
    assert server.node_ids("min_free_processors=1") == []
    assert server.sql("SELECT approved, paused FROM hosts") == [(0, 0)]

    # who may decide
    for role_token in (token, server.tokens["submit"]):
        assert server.admin("newbie", "approve", token=role_token).is_error(403)
    assert server.request("POST", "/v1/admin/hosts/newbie/approve", b"").is_error(401)
    assert server.admin("ghost", "approve").is_error(404)
    assert server.admin("newbie", "destroy").is_error(404)
    assert server.state_of("newbie") == "Pending"

    assert server.admin("newbie", "approve").json() == {"host": "newbie", "state": "Ready"}
    assert server.state_of("newbie") == "Ready" and ce_free_cpus(server) == 6
    assert server.sql("SELECT approved, paused FROM hosts") == [(1, 0)]

    assert server.admin("newbie", "pause").json()["state"] == "Paused"
    assert server.report("newbie", token, processors=6).json()["state"] == "Paused"  # reporting does not resume
    node = parse_node(server.get("/v1/nodes/newbie?format=xml").body)
    assert node.state == "Idle"  # the agent's word, from the SSS vocabulary
    assert server.get("/v1/nodes/newbie").json()["life_cycle"] == "Paused"
    assert glue_hosts(server)["newbie"]["state"] == "Paused" and ce_free_cpus(server) == 0
    (ce,) = glue_tree(server)["computing_elements"]
    assert ce["info"]["total_cpus"] == 6  # a Paused host still counts in TotalCPUs
    glue_xml = ElementTree.fromstring(server.get("/v1/glue?format=xml").body)
    assert [h.findtext(f"{GLUE_NS}State") for h in glue_xml.iter(f"{GLUE_NS}Host")] == ["Paused"]

    assert server.admin("newbie", "resume").json()["state"] == "Ready"
    assert server.state_of("newbie") == "Ready" and ce_free_cpus(server) == 6
    # a second host also waits for approval
    assert server.report("second", server.agent_token()).json()["state"] == "Pending"
    assert sorted(server.node_ids("state=Pending")) == ["second"]


def test_silent_host_becomes_unreachable_and_comes_back(serve_app: ServerFactory) -> None:
    heartbeat, missed = 0.3, 2
    server = serve_app({"lifecycle": {"heartbeat_seconds": heartbeat, "missed_heartbeats": missed}})
    token, paused_token = server.agent_token(), server.agent_token()
    reported = time.monotonic()
    assert server.report("quiet", token, processors=4).json()["state"] == "Ready"
    server.report("napper", paused_token, processors=2)
    server.admin("napper", "pause")

    wait_for(lambda: server.state_of("quiet") == "Unreachable", timeout=10, message="quiet to be Unreachable")
    assert time.monotonic() - reported >= heartbeat * missed * 0.9
    wait_for(lambda: server.state_of("napper") == "Unreachable", timeout=10, message="napper to be Unreachable")
    assert sorted(server.node_ids("state=Unreachable")) == ["napper", "quiet"]
    # in SSS terms a host not heard from is Unknown
    assert parse_node(server.get("/v1/nodes/quiet", headers={"Accept": "application/xml"}).body).state == "Unknown"
    hosts = glue_hosts(server)
    assert hosts["quiet"]["state"] == "Unreachable" and hosts["quiet"]["free_cpus"] == 0
    # a paused host that went silent still says it was paused
    assert hosts["napper"]["state"] == "Unreachable" and hosts["napper"]["paused"] is True
    assert "paused" not in hosts["quiet"]
    assert server.get("/v1/nodes/napper").json()["paused"] is True
    assert ce_free_cpus(server) == 0
    tree = glue_tree(server)
    assert tree["computing_elements"][0]["info"]["total_cpus"] == 0  # Unreachable hosts count in neither
    assert sum(sub["states"]["Unreachable"] for sub in tree["subclusters"]) == 2

    # a report brings it back: Ready, or Paused for the host an admin paused
    assert server.report("quiet", token, processors=4).json()["state"] == "Ready"
    assert server.state_of("quiet") == "Ready" and ce_free_cpus(server) == 4
    assert server.report("napper", paused_token, processors=2).json()["state"] == "Paused"
    assert server.node_ids("min_free_processors=4") == ["quiet"]
    # and silence again makes it Unreachable again
    wait_for(lambda: server.state_of("quiet") == "Unreachable", timeout=10, message="Unreachable again")


def test_reads_need_a_token_when_the_config_says_so(serve_app: ServerFactory) -> None:
    server = serve_app({"service": {"read_token_required": True}})
    token = server.agent_token()
    server.report("guarded", token)
    for path in ("/v1/nodes", "/v1/nodes/guarded", "/v1/glue", "/v1/glue/hosts", "/v1/glue/hosts/guarded"):
        assert server.get(path).is_error(401), path
        assert server.get(path, token="not-a-known-token-at-all").is_error(401), path
        for role_token in (token, server.tokens["submit"], server.tokens["admin"]):
            assert server.get(path, token=role_token).status == 200, path
    assert server.get("/healthz").status == 200


# --- restarts ----------------------------------------------------------------------------------

def test_bindings_decisions_and_state_survive_restart(serve: ServerFactory) -> None:
    server = serve({"lifecycle": {"require_approval": True}})
    first, second = server.agent_token(), server.agent_token()
    server.report("keeper", first, processors=8)
    server.report("other", second, processors=2)
    server.admin("keeper", "approve")
    server.admin("keeper", "pause")
    nodes_before = server.get("/v1/nodes").json()

    server.restart()
    assert server.get("/healthz").json()["hosts"] == 2
    assert server.get("/v1/nodes").json() == nodes_before  # rebuilt from SQLite, before any report
    assert server.state_of("keeper") == "Paused" and server.state_of("other") == "Pending"
    assert sorted(glue_hosts(server)) == ["keeper", "other"]
    # the bindings hold across the restart
    assert server.post_node(node_document("elsewhere"), first).is_error(403)
    assert server.post_node(node_document("keeper"), second).is_error(403)
    assert server.report("keeper", first, processors=8).json()["state"] == "Paused"
    assert server.admin("keeper", "resume").json()["state"] == "Ready"


def test_a_binding_the_tokens_file_overrides_is_dropped(serve: ServerFactory) -> None:
    # A token bound on first use, then pinned to another host in the tokens file: its stored claim
    # on the first host must go, or another token's first claim on that host failed in SQLite and
    # was answered 503 "try again", forever (found in review).
    server = serve()
    moved, newcomer = server.agent_token(), server.agent_token()
    server.report("node1", moved)
    server.stop()
    text = server.tokens_file.read_text().replace(f"agent {moved}\n", f"agent {moved} node2\n")
    assert text != server.tokens_file.read_text()
    server.tokens_file.write_text(text)
    server.start()
    assert server.post_node(node_document("node1"), moved).is_error(403)  # pinned elsewhere now
    server.report("node2", moved)
    server.report("node1", newcomer)  # the host is free again: first use binds it
    assert dict(server.sql("SELECT host_id, token_hash FROM token_bindings")) == {
        "node1": digest(newcomer)}  # node2 is pinned by the file, not stored


def test_acknowledged_reports_survive_kill_9(serve: ServerFactory) -> None:
    threads_count = 6
    server = serve({"store": {"history_per_host": 10000}}, agents=threads_count)
    tokens = [server.agent_token() for _ in range(threads_count)]
    acknowledged: dict[str, list[bytes]] = {f"crash{i}": [] for i in range(threads_count)}
    total = threading.Semaphore(0)
    stop = threading.Event()
    port = server.port

    def post_until_refused(index: int) -> None:
        host = f"crash{index}"
        for sequence in range(100000):
            if stop.is_set():
                return
            document = node_document(host, sequence=sequence, processors=index + 1)
            try:
                reply = request(port, "POST", "/v1/nodes", document, token=tokens[index], timeout=10)
            except (OSError, http.client.HTTPException):
                return  # the server is gone
            if reply.status != 200:
                return
            acknowledged[host].append(document)
            total.release()

    workers = [threading.Thread(target=post_until_refused, args=(i,), daemon=True) for i in range(threads_count)]
    for worker in workers:
        worker.start()
    for _ in range(120):  # kill in mid-stream, once enough reports were answered
        assert total.acquire(timeout=30), "reports were not answered"
    server.kill()
    stop.set()
    for worker in workers:
        worker.join(timeout=30)
        assert not worker.is_alive()

    acked = {host: docs for host, docs in acknowledged.items() if docs}
    assert sum(map(len, acked.values())) >= 120
    for host, docs in acked.items():
        stored = [row[0] for row in server.sql("SELECT document FROM reports WHERE host_id = ? ORDER BY seq", host)]
        # every acknowledged report is there, in the order it was sent (at most one more: in flight at the kill)
        assert stored[:len(docs)] == docs, host
        assert len(stored) <= len(docs) + 1

    server.start()
    assert server.get("/healthz").json()["hosts"] == len(acked)
    assert len(glue_tree(server)["hosts"]) == len(acked)
    assert sum(h["total_cpus"] for h in glue_hosts(server).values()) == sum(int(h[5:]) + 1 for h in acked)
    for host, docs in acked.items():
        node = server.get(f"/v1/nodes/{host}").json()
        newest = int(next(e["value"] for e in node["extensions"] if e["name"] == "Sequence"))
        assert newest >= sequence_of(docs[-1])
        assert node["life_cycle"] == "Ready"
    # and the service goes on: the same tokens, bound as before
    index = int(next(iter(acked))[5:])
    assert server.post_node(node_document(f"crash{index}"), tokens[index]).status == 200
    assert server.post_node(node_document("crash-new"), tokens[index]).is_error(403)


def test_a_store_that_refuses_the_write_answers_503_and_keeps_nothing(serve_app: ServerFactory) -> None:
    """A real SQLite failure (a trigger aborts one host's insert): 503 with Retry-After, no binding
    made for the refused claim, no state; other hosts go on being served."""
    server = serve_app()
    conn = sqlite3.connect(server.db, timeout=10)
    conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON reports WHEN NEW.host_id = 'doomed' "
                 "BEGIN SELECT RAISE(ABORT, 'disk full, say'); END")
    conn.commit()
    conn.close()
    token = server.agent_token()
    reply = server.post_node(node_document("doomed"), token)
    assert reply.status == 503 and reply.headers.get("retry-after") == "5", (reply.status, reply.body)
    assert reply.json()["error"] == "store unavailable"
    assert server.get("/v1/nodes/doomed").status == 404
    assert server.sql("SELECT count(*) FROM reports WHERE host_id = 'doomed'") == [(0,)]
    # The claim failed with the report (one transaction), so the token is still free for another host.
    assert server.sql("SELECT count(*) FROM token_bindings") == [(0,)]
    server.report("survivor", token)
    assert server.node_ids() == ["survivor"]


def test_serve_says_in_one_line_why_it_cannot_start(tmp_path: Any) -> None:
    """A database newer than this infosvc, or a port already taken: exit 1 and one line, no traceback."""
    import subprocess
    import sys

    from infosvc.store import Store

    db = tmp_path / "newer.sqlite"
    Store(db).close()
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version={len(MIGRATIONS) + 1}")
    conn.close()
    run = subprocess.run([sys.executable, "-m", "infosvc", "serve", "--db", str(db), "--listen", "127.0.0.1:0"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "newer than this infosvc" in run.stderr and "Traceback" not in run.stderr

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = subprocess.run([sys.executable, "-m", "infosvc", "serve", "--db", str(tmp_path / "ok.sqlite"),
                              "--listen", f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    assert "serving on" not in run.stdout  # the URLs are printed once listening, not before
