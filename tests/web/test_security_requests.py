"""Attacks on what one request may cost, and on which host a name means, each against a
real server on loopback: quadratic Range scans (2), the per-request Range budget (3), answers
thousands of times their request (4), a host passed off under another's name (6), Ids no route
could address (9). Each failed before its fix; the floods check that /healthz stays quick meanwhile.
"""

from __future__ import annotations

import socket
import time

import pytest

from support.documents import make_node, node_document
from support.latency import healthz_p99_during

from support.server import Reply, Server, ServerFactory, wait_for
from infosvc.codec.node_xml import node_to_xml

# Latency and timeouts measured from outside: run alone, not beside other tests (make test).
pytestmark = pytest.mark.serial


def match(server: Server, body: bytes, query: str = "", timeout: float = 30.0) -> Reply:
    return server.request("POST", "/v1/match" + query, body, headers={"Content-Type": "application/xml"},
                          timeout=timeout)


def ranged(*ranges: str) -> bytes:
    terms = "".join(f'<Node aggregation="Range">{r}</Node>' for r in ranges)
    return f"<Job><Id>r</Id><Requested>{terms}</Requested></Job>".encode()


def quick_400(server: Server, body: bytes, words: str, seconds: float = 3.0) -> Reply:
    """A 400 with the JSON error, within `seconds` (the attacks took 26 s to minutes), and a body
    of a few hundred bytes whatever the request's size."""
    started = time.monotonic()
    reply = match(server, body)
    took = time.monotonic() - started
    assert reply.is_error(400), (reply.status, reply.body[:300])
    assert words in reply.body.decode(), reply.body[:500]
    assert len(reply.body) < 2000, len(reply.body)
    assert took < seconds, took
    return reply


@pytest.fixture(scope="module")
def site(module_serve: ServerFactory) -> Server:
    server = module_serve(agents=12)
    server.report("hosta", server.agent_token(), processors=8)
    for i in range(6):
        server.report(f"thin{i:02d}", server.agent_token(), processors=2, memory_mb=4096)
    return server


# --- 2: Range bounding in linear time -----------------------------------------------------------

@pytest.mark.parametrize("expression", [
    "n" + "[" * 262_000,  # took 210 s of the event loop, then echoed 524 KB
    "a" + "," * 262_000,  # took 38 s
    "n[1-2]" + "]" * 100_000,
    "n" + "[1" * 100_000,
])
def test_a_hostile_range_is_a_quick_short_400(site: Server, expression: str) -> None:
    quick_400(site, ranged(expression), "Range")


def test_range_scans_are_linear_in_the_model() -> None:
    from ClusterShell.NodeSet import NodeSetParseError

    from infosvc.model.nodeset import MAX_EXPRESSION, names_upper_bound, split_terms
    from infosvc.hosts.query import HostNames, QueryError

    for text in ("n" + "[" * 200_000, "a" + "," * 200_000, "x[1]" * 5000):
        started = time.monotonic()
        with pytest.raises(NodeSetParseError) as caught:
            names_upper_bound(text)
        assert time.monotonic() - started < 0.5 and len(str(caught.value)) < 300
        with pytest.raises(QueryError):
            HostNames.parse("nodes", text)
    # within the length bound, the scan still reads each character once
    text = "n" + "[" * (MAX_EXPRESSION - 1)
    started = time.monotonic()
    with pytest.raises(NodeSetParseError, match="unbalanced or nested bracket at character 2"):
        split_terms(text)
    assert time.monotonic() - started < 0.5
    assert [(t.operator, t.text, t.brackets) for t in split_terms("a[1-3]b[2],c!d[5]&e")] == [
        (",", "a[1-3]b[2]", ("1-3", "2")), (",", "c", ()), ("!", "d[5]", ("5",)), ("&", "e", ())]


# --- 3: one budget of names per request ---------------------------------------------------------

def test_the_range_budget_is_per_request_not_per_range(site: Server) -> None:
    # 100 terms of 100,000 names each (a 4.7 KB body) took 26 s and 1.1 GB before
    quick_400(site, ranged(",".join(f"n{i}x[1-100000]" for i in range(100))), "names more than")
    quick_400(site, ranged(*(f"n{i}x[1-60000]" for i in range(3))), "in all")
    jobs = "".join(f'<Job><Id>j{i}</Id><Requested><Node aggregation="Range">n{i}x[1-60000]</Node></Requested></Job>'
                   for i in range(16))
    quick_400(site, f"<JobGroup><Id>g</Id>{jobs}</JobGroup>".encode(), "in all")
    # within the budget, it is matched
    reply = match(site, ranged("n[1-40000]", "m[1-40000]"))
    assert reply.status == 200, reply.body[:300]


def test_a_flood_of_range_attacks_leaves_healthz_quick(site: Server) -> None:
    bodies = [ranged("n" + "[" * 262_000), ranged("a" + "," * 262_000),
              ranged(",".join(f"n{i}x[1-100000]" for i in range(100))), ranged("n[1-50000]", "m[1-49000]")]
    sent = iter(range(1 << 30))

    def attack() -> None:
        reply = match(site, bodies[next(sent) % len(bodies)])
        assert reply.status in (200, 400, 503), reply.status

    assert healthz_p99_during(site, attack, 40) < 0.05


# --- 4: answers bounded whatever the request ----------------------------------------------------

def test_a_large_requested_value_is_quoted_as_an_excerpt_and_hosts_grouped(site: Server) -> None:
    # A 200 KB <Node> against 2,000 hosts gave a 400 MB answer: the value was quoted per host.
    big = "x" * 200_000
    reply = match(site, f"<Job><Id>b</Id><Requested><Node>{big}</Node></Requested></Job>".encode())
    assert reply.status == 200, reply.body[:300]
    answer = reply.json()
    assert answer["matches"] == [] and answer["rejected_hosts"] == 7
    assert len(reply.body) < 4000, len(reply.body)
    [group] = answer["rejected"]  # one reason, so one group: not 7 copies of the value
    assert group["hosts"] == "hosta,thin[00-05]" and group["count"] == 7
    assert "(200000 characters)" in group["reasons"][0] and len(group["reasons"][0]) < 200


def test_the_answer_is_limited_and_paged(site: Server) -> None:
    job = b"<Job><Id>p</Id><Requested><Processors>1</Processors></Requested></Job>"
    everything = match(site, job).json()
    assert everything["matches_total"] == 7 and len(everything["matches"]) == 7
    first = match(site, job, "?limit=2").json()
    assert [m["host"] for m in first["matches"]] == [m["host"] for m in everything["matches"][:2]]
    assert first["matches_total"] == 7
    # reasons per host: each thin host has its own free memory, so paging the groups shows them all
    wide = b"<Job><Id>w</Id><Requested><Processors>4</Processors></Requested></Job>"
    whole = match(site, wide).json()
    pages = [match(site, wide, f"?rejected_limit=1&rejected_offset={i}").json()
             for i in range(whole["rejected_groups"])]
    assert [p["rejected"][0] for p in pages] == whole["rejected"]
    assert match(site, wide, f"?rejected_offset={whole['rejected_groups']}").json()["rejected"] == []
    for query in ("?limit=0", "?limit=10001", "?limit=x", "?rejected_limit=1001", "?limit=%C2%B2", "?color=red"):
        assert match(site, wide, query).is_error(400), query


def test_reasons_per_group_are_bounded(site: Server) -> None:
    terms = "".join(f"<Feature>f{i}</Feature>" for i in range(40))
    answer = match(site, f"<Job><Id>f</Id><Requested>{terms}</Requested></Job>".encode()).json()
    for group in answer["rejected"]:
        assert len(group["reasons"]) == 11 and group["reasons"][-1] == "and 30 more reasons"


def test_a_flood_of_large_answers_leaves_healthz_quick(site: Server) -> None:
    body = f"<Job><Id>b</Id><Requested><Node>{'y' * 200_000}</Node></Requested></Job>".encode()

    def attack() -> None:
        reply = match(site, body)
        assert reply.status in (200, 503) and len(reply.body) < 4000

    assert healthz_p99_during(site, attack, 40) < 0.05


def test_a_match_past_its_work_budget_is_refused() -> None:
    from infosvc.codec.job_xml import parse_job
    from infosvc.matching import MatchTooCostly, compile_requirements, match as match_site
    from infosvc.model.job import resolve
    from infosvc.hosts.rollup import Rollup, host_from_node
    from infosvc.config.site import SiteConfig

    config = SiteConfig()
    rollup, nodes = Rollup(config), {}
    for i in range(300):
        node = make_node(f"h{i:03d}")
        nodes[node.id] = node
        rollup.update(host_from_node(node, "Ready", config, "2026-01-01T00:00:00Z"))
    job = resolve(parse_job(b"<Job><Id>c</Id><Requested><Feature>f</Feature></Requested></Job>").job)[0]
    requirements = compile_requirements(job)
    requirements.start_budget(0.0)
    with pytest.raises(MatchTooCostly, match="takes more than 0 s"):
        match_site(requirements, rollup, nodes.get)
    requirements.start_budget(60.0)
    result = match_site(requirements, rollup, nodes.get)
    requirements.start_budget(0.0)  # explaining is work too
    with pytest.raises(MatchTooCostly):
        result.as_json()


def test_matches_under_way_are_bounded(serve: ServerFactory) -> None:
    """Past MAX_MATCHES_IN_FLIGHT requests under way, the next is a 503 with Retry-After before its
    body is read; once they end, matches are answered again."""
    from infosvc.web.match import MAX_MATCHES_IN_FLIGHT

    server = serve({"service": {"body_timeout_seconds": 3}})
    stalled = []
    for _ in range(MAX_MATCHES_IN_FLIGHT):  # bodies announced and never sent
        s = socket.create_connection(("127.0.0.1", server.port))
        s.sendall(b"POST /v1/match HTTP/1.1\r\nHost: x\r\nContent-Type: application/xml\r\n"
                  b"Content-Length: 100\r\n\r\n<Job>")
        stalled.append(s)
    try:
        reply = wait_for(lambda: (r := match(server, b"<Job><Id>x</Id></Job>")).status == 503 and r,
                         message="a 503 while the gate is full")
        assert reply.is_error(503) and reply.headers["retry-after"] == "1"
        wait_for(lambda: match(server, b"<Job><Id>x</Id></Job>").status == 200, message="the gate to open again")
    finally:
        for s in stalled:
            s.close()


# --- 6 and 9: a host is its canonical Id, and every accepted Id can be addressed ------------------

def test_a_host_is_named_by_its_bound_id_alone(serve: ServerFactory) -> None:
    server = serve()
    server.report("hosta", server.agent_token(), processors=2, memory_mb=1024)
    # A fresh token reporting Id=evil-node with Name=hostA was ranked first for a job naming hostA.
    evil = make_node("evil-node", processors=64, memory_mb=1 << 20)
    evil.name = "hostA"
    refused = server.post_node(node_to_xml(evil), server.agent_token())
    assert refused.is_error(403) and "is the Id of another host" in refused.json()["error"]
    # Id=HOSTA. is hosta: another token's host, refused
    assert server.post_node(node_document("HOSTA."), server.agent_token()).is_error(403)
    # the Name alone never names a host: evil-node under another Name is matched by its Id only
    evil.name = "innocent"
    assert server.post_node(node_to_xml(evil), server.agent_token()).status == 200
    answer = match(server, b"<Job><Id>n</Id><Requested><Node>hostA</Node></Requested></Job>").json()
    assert [m["host"] for m in answer["matches"]] == ["hosta"]
    answer = match(server, b"<Job><Id>n</Id><Requested><Node>innocent</Node></Requested></Job>").json()
    assert answer["matches"] == []


def test_ids_are_kept_in_one_canonical_form(serve: ServerFactory) -> None:
    server = serve()
    token = server.agent_token()
    reply = server.post_node(node_document("Mixed.Example.ORG."), token)
    assert reply.status == 200 and reply.json()["host"] == "mixed.example.org"
    assert server.post_node(node_document("mixed.example.org"), token).status == 200  # the same host
    assert server.node_ids() == ["mixed.example.org"]
    assert server.sql("SELECT id FROM hosts") == [("mixed.example.org",)]
    assert server.sql("SELECT host_id FROM token_bindings") == [("mixed.example.org",)]
    for path in ("/v1/nodes/MIXED.example.org.", "/v1/glue/hosts/Mixed.Example.Org"):
        assert server.get(path).status == 200, path
    assert server.admin("MIXED.EXAMPLE.ORG", "pause").status == 200
    assert server.state_of("mixed.example.org") == "Paused"


@pytest.mark.parametrize("ident", [
    "a{b}", "a/b", "a b", "a,b", "a[1]", "ä.example", "-lead", "a..b", ".", "x" * 254, "x" * 100_000,
    "a." + "b" * 64,
])
def test_ids_outside_the_grammar_are_refused(serve: ServerFactory, ident: str) -> None:
    server = serve()
    reply = server.post_node(node_document(ident), server.agent_token())
    assert reply.is_error(400), (reply.status, reply.body[:200])
    assert reply.json()["detail"][0]["element"] == "Id" and len(reply.body) < 1000
    assert server.node_ids() == []


def test_every_accepted_id_is_addressed_by_every_route(serve: ServerFactory) -> None:
    from hypothesis import given, settings, strategies as st

    from infosvc.model.hostid import MAX_ID_CHARS, host_id

    label = st.from_regex(r"[a-z0-9_][a-z0-9_-]{0,62}", fullmatch=True)
    ids = st.lists(label, min_size=1, max_size=4).map(".".join).filter(lambda i: len(i) <= MAX_ID_CHARS)
    server = serve(agents=40)
    seen: set[str] = set()

    @settings(max_examples=25, deadline=None, database=None)
    @given(ids, st.booleans())
    def addressed(ident: str, upper: bool) -> None:
        assert host_id(ident) == ident
        if ident in seen:
            return
        seen.add(ident)
        reply = server.post_node(node_document(ident.upper() if upper else ident), server.agent_token())
        assert reply.status == 200 and reply.json()["host"] == ident, reply.body[:200]
        for path in (f"/v1/nodes/{ident}", f"/v1/glue/hosts/{ident}", f"/v1/nodes?nodes={ident}"):
            got = server.get(path)
            assert got.status == 200, (path, got.body[:200])
        assert ident in server.node_ids(f"nodes={ident}")
        assert server.admin(ident, "pause").status == 200 and server.state_of(ident) == "Paused"
        assert server.admin(ident, "resume").status == 200

    addressed()


def test_a_tokens_file_host_outside_the_grammar_is_refused(tmp_path: pytest.TempPathFactory) -> None:
    from pathlib import Path

    from infosvc.hosts.tokens import TokenFileError, Tokens

    path = Path(str(tmp_path)) / "tokens"
    path.write_text("agent 0123456789abcdef0123 Node{1}\n")
    with pytest.raises(TokenFileError, match=":1: the Id"):
        Tokens.load(path)
    path.write_text("agent 0123456789abcdef0123 HostA.\n")
    tokens = Tokens.load(path)
    assert tokens.holder_of("hosta") is not None


def test_stored_ids_are_made_canonical_by_the_migration(tmp_path: pytest.TempPathFactory) -> None:
    import sqlite3
    from pathlib import Path

    from infosvc.store import MIGRATIONS, Store, connect

    path = Path(str(tmp_path)) / "old.sqlite"
    db = connect(path)
    MIGRATIONS[0](db)
    db.execute("PRAGMA user_version=1")
    conn = db.conn
    for ident, at in (("HostA.", 1.0), ("hostb", 2.0), ("HOSTB", 3.0)):
        conn.execute("INSERT INTO hosts VALUES (?, ?, ?, ?, 1, 0)", [ident, node_document(ident), at, at])
        conn.execute("INSERT INTO reports (host_id, reported_at, document) VALUES (?, ?, ?)",
                     [ident, at, node_document(ident)])
        conn.execute("INSERT INTO token_bindings VALUES (?, ?, ?)", [f"t-{ident}", ident, at])
    conn.close()
    store = Store(path)
    try:
        assert sorted(r.id for r in store.hosts()) == ["hosta", "hostb"]
        assert store.token_bindings() == {"t-HostA.": "hosta", "t-hostb": "hostb"}
    finally:
        store.close()
    check = sqlite3.connect(path)
    assert sorted(check.execute("SELECT DISTINCT host_id FROM reports").fetchall()) == [("hosta",), ("hostb",)]
    check.close()


def test_a_name_set_holds_what_clustershell_writes_out() -> None:
    """NameSet tests membership without expanding (the expansion stalled the loop): it must hold
    exactly the names ClusterShell writes out, and refuse exactly what ClusterShell refuses."""
    from ClusterShell.NodeSet import NodeSetParseError
    from hypothesis import given, settings, strategies as st

    from infosvc.model.nodeset import NameSet, expand_names

    number = st.builds(lambda n, width: f"{n:0{width}d}" if width else str(n),
                       st.integers(0, 30), st.sampled_from([0, 0, 1, 2, 3]))
    part = st.one_of(number, st.builds(lambda a, b, step: f"{a}-{b}{step}", number, number,
                                       st.sampled_from(["", "", "/2", "/3"])))
    bracket = st.lists(part, min_size=1, max_size=3).map(lambda parts: "[" + ",".join(parts) + "]")
    term = st.builds(lambda prefix, first, middle, second, suffix: prefix + first + middle + second + suffix,
                     st.sampled_from(["n", "ab", "x1-"]), bracket, st.sampled_from(["", "-", ".e"]),
                     st.sampled_from(["", "[3-7]", "[03-07]"]), st.sampled_from(["", ".e"]))
    names = [f"{p}{a}{m}{b}{s}" for p in ("n", "ab", "x1-") for a in ("0", "1", "01", "5", "05", "10", "012", "29")
             for m in ("", "-", ".e") for b in ("", "3", "03", "7") for s in ("", ".e")]

    @settings(max_examples=300, deadline=None, database=None)
    @given(st.lists(term, min_size=1, max_size=2).map(",".join))
    def agrees(expression: str) -> None:
        try:
            written = {name.lower() for name in expand_names(expression)}
        except NodeSetParseError:
            with pytest.raises(NodeSetParseError):
                NameSet(expression)
            return
        held = NameSet(expression)
        assert [n for n in names if n in held] == [n for n in names if n in written]

    agrees()


def test_a_nodes_query_names_hosts_without_regard_to_case(site: Server) -> None:
    assert site.node_ids("nodes=THIN[00-01]") == ["thin00", "thin01"]
    assert site.node_ids("nodes=HostA") == ["hosta"]


def test_a_costly_nodes_filter_is_evaluated_off_the_event_loop(serve_app: ServerFactory,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # 1,150 terms (8 KB, no token) tested against each host held a 2,000-host site's event loop 1.5-2 s
    # on each of /v1/nodes, /v1/glue/hosts and /v1/glue
    import threading

    from infosvc.hosts import aggregator
    from infosvc.hosts.aggregator import INLINE_CHOOSING
    from infosvc.hosts.query import HostFilter, HostNames

    server = serve_app(agents=6)
    for i in range(6):
        server.report(f"node{i}", server.agent_token(), processors=2)
    on_loop: list[bool] = []
    real = HostFilter.select_from

    def where(self: HostFilter, entries: Any, config: Any) -> Any:
        on_loop.append(threading.current_thread() is server._thread)  # type: ignore[attr-defined]
        return real(self, entries, config)
    monkeypatch.setattr(HostFilter, "select_from", where)
    # 6 hosts x 1,151 terms is 6,906 steps: past the bound at 2,000 hosts, within it here; so the
    # bound is lowered to what this site makes of the query
    monkeypatch.setattr(aggregator, "INLINE_CHOOSING", 5000)
    costly = ",".join(["a[1-9]"] * 1150) + ",node3"
    assert HostNames.parse("nodes", costly).cost(2000) == 2000 * 1151 > INLINE_CHOOSING
    for path in ("/v1/nodes", "/v1/glue/hosts", "/v1/glue"):
        on_loop.clear()
        reply = server.get(f"{path}?nodes={costly}")
        assert reply.status == 200 and b"node3" in reply.body and b"node4" not in reply.body, (path, reply.body[:200])
        assert on_loop and not any(on_loop), path
    on_loop.clear()
    assert [node["id"] for node in server.get("/v1/nodes?nodes=node[2-3]").json()] == ["node2", "node3"]
    assert on_loop and all(on_loop)  # a cheap one is chosen at once, on the loop
