"""A top level over real site aggregators on loopback (docs/grid.md, Federation): three `infosvc
serve` sites and a top-level one; the union with each site's entities, a clash of ids published
under each site's name, a killed site stale and then dropped after the delete delay and back when
it answers again, a wrong read token shown as failing; every answer against the published schemas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from infosvc.codec import safexml
from infosvc.hosts.tokens import new_token
from support.documents import node_document
from support.server import Server, ServerFactory, free_port, wait_for

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
GLUE_SCHEMA = Draft202012Validator(json.loads((SCHEMAS / "glue.schema.json").read_text()))


def _site(serve: ServerFactory, read_token: bool) -> tuple[Server, str | None]:
    """A site; with `read_token`, one that asks readers for a token, and a `read` token for the top."""
    site = serve({"service": {"read_token_required": True}} if read_token else {}, start=False)
    token = None
    if read_token:
        token = new_token()
        site.tokens_file.write_text(site.tokens_file.read_text() + f"read {token}\n")
    return site.start(), token


def _top(serve: ServerFactory, upstreams: list[tuple[str, str, str | None]], *, delete_delay: float = 3.0,
         extra_args: tuple[str, ...] = (), max_body_bytes: int = 1 << 26) -> Server:
    """A top level over (name, url, read token) upstreams, pulling every 0.3 s."""
    top = serve(start=False, extra_args=extra_args)
    lines = ["[federation]", "interval_seconds = 0.3", f"delete_delay_seconds = {delete_delay}",
             "timeout_seconds = 2", f"max_body_bytes = {max_body_bytes}"]
    for name, url, token in upstreams:
        lines += ["[[federation.upstreams]]", f'url = "{url}"', f'name = "{name}"']
        if token is not None:
            token_file = top.directory / f"{name}.token"
            token_file.write_text(token + "\n")
            lines.append(f'token_file = "{token_file}"')
    top.config_file.write_text("\n".join(lines) + "\n")
    return top.start()


def _glue(top: Server, query: str = "") -> Any:
    reply = top.get("/v1/glue" + query)
    assert reply.status == 200, (reply.status, reply.body)
    tree = reply.json()
    GLUE_SCHEMA.validate(tree)
    return tree


def _sites(tree: Any) -> dict[str, Any]:
    return {site["name"]: site for site in tree["sites"]}


def test_the_union_of_three_sites_and_a_site_that_dies(serve: ServerFactory) -> None:
    (a, a_token), (b, b_token), (c, _) = _site(serve, True), _site(serve, True), _site(serve, False)
    for site, hosts in ((a, ["a1", "a2", "dup"]), (b, ["b1"]), (c, ["c1", "c2", "dup"])):
        for host in hosts:
            site.report(f"{host}.example.org", site.agent_token())
    assert a.post_node(node_document("x.example.org"), a_token).is_error(403)  # a read token reads, no more
    top = _top(serve, [("site-a", a.url, a_token), ("site-b", b.url, b_token), ("site-c", c.url, None)])

    def union() -> Any:
        tree = _glue(top)
        return tree if len(tree["hosts"]) == 7 and all(s["state"] == "ok" for s in tree["sites"]) else None

    tree = wait_for(union, timeout=20, message="the union of the three sites")
    hosts = {h["unique_id"]: h for h in tree["hosts"]}
    # ids only one site publishes stay; `dup` (a and c) and every site's `default` cluster and CE
    # are published under each site's name, references rewritten with them
    assert set(hosts) == {"a1.example.org", "a2.example.org", "b1.example.org", "c1.example.org",
                          "c2.example.org", "site-a/dup.example.org", "site-c/dup.example.org"}
    assert {h["site"] for h in tree["hosts"]} == {"site-a", "site-b", "site-c"}
    assert hosts["site-c/dup.example.org"]["site"] == "site-c" and hosts["c1.example.org"]["site"] == "site-c"
    assert hosts["b1.example.org"]["cluster"] == "site-b/default"
    assert sorted(c["unique_id"] for c in tree["clusters"]) == ["site-a/default", "site-b/default", "site-c/default"]
    assert {ce["unique_id"]: ce["clusters"] for ce in tree["computing_elements"]}["site-a/default"] == ["site-a/default"]
    sub_ids = {h["subcluster"] for h in tree["hosts"]}
    assert sub_ids == {s["unique_id"] for s in tree["subclusters"]}
    sites = _sites(tree)
    assert set(sites) == {"site-a", "site-b", "site-c"} and sites["site-b"]["url"] == b.url
    assert all(s["last_success"] and not s["stale"] for s in sites.values())
    assert [sites[n]["hosts"] for n in ("site-a", "site-b", "site-c")] == [3, 1, 3]
    # the same union in GLUE 1.1 XML, valid against its schema
    reply = top.get("/v1/glue?format=xml")
    assert reply.status == 200
    root = safexml.parse(reply.body)
    safexml.validate(root, safexml.schema("glue-ce-1.1.xsd"))
    assert reply.body.count(b"<Host>") == 7
    # one entity by its id (a prefixed host, a prefixed cluster), hosts filtered over the union
    one = top.get("/v1/glue/hosts/site-a/dup.example.org")
    assert one.status == 200 and one.json()["site"] == "site-a"
    assert top.get("/v1/glue/clusters/site-c/default").json()["subclusters"]
    assert top.get("/v1/glue/hosts/dup.example.org").status == 404
    listed = top.get("/v1/glue/hosts?nodes=c[1-2].example.org").json()["hosts"]
    assert [h["unique_id"] for h in listed] == ["c1.example.org", "c2.example.org"]
    part = _glue(top, "?nodes=a[1-2].example.org,b1.example.org")
    assert sorted(h["unique_id"] for h in part["hosts"]) == ["a1.example.org", "a2.example.org", "b1.example.org"]
    assert sum(s["host_count"] for s in part["subclusters"]) == 3
    assert top.get("/v1/glue/hosts?feature=BigMem").is_error(400)
    health = top.get("/healthz").json()
    assert health["status"] == "ok" and [u["state"] for u in health["upstreams"]] == ["ok", "ok", "ok"]

    # site b dies: its last copy stays, marked stale, then goes after the delete delay
    b.kill()
    stale = wait_for(lambda: (t := _glue(top)) and _sites(t)["site-b"]["stale"] and t, timeout=10,
                     message="site b marked stale")
    assert "b1.example.org" in {h["unique_id"] for h in stale["hosts"]}
    assert _sites(stale)["site-b"]["state"] == "stale" and _sites(stale)["site-b"]["error"]
    metrics = top.get("/metrics").body.decode()
    assert f'infosvc_federation_site_stale{{site="site-b",url="{b.url}"}} 1.0' in metrics
    assert f'infosvc_federation_site_up{{site="site-b",url="{b.url}"}} 0.0' in metrics
    assert f'infosvc_federation_site_up{{site="site-a",url="{a.url}"}} 1.0' in metrics
    assert [u["state"] for u in top.get("/healthz").json()["upstreams"]] == ["ok", "stale", "ok"]
    dropped = wait_for(lambda: (t := _glue(top)) and _sites(t)["site-b"]["state"] == "failing" and t, timeout=10,
                       message="site b dropped after the delete delay")
    assert "b1.example.org" not in {h["unique_id"] for h in dropped["hosts"]} and len(dropped["hosts"]) == 6
    assert _sites(dropped)["site-b"]["hosts"] == 0 and not _sites(dropped)["site-b"]["stale"]

    # it answers again: its hosts are back
    b.start()
    wait_for(lambda: "b1.example.org" in {h["unique_id"] for h in _glue(top)["hosts"]}, timeout=10,
             message="site b back in the union")
    assert top.process is not None and top.process.poll() is None
    assert "pulling site-b" in top.log.read_text() and "has not answered for" in top.log.read_text()


def test_a_wrong_read_token_is_a_failing_site_not_a_crash(serve: ServerFactory, tmp_path: Path) -> None:
    (guarded, _), (open_site, _) = _site(serve, True), _site(serve, False)
    guarded.report("g1.example.org", guarded.agent_token())
    open_site.report("o1.example.org", open_site.agent_token())
    (tmp_path / "wrong.token").write_text(new_token() + "\n")
    # one upstream from the config, one from the command line (--upstream), with a token it does not know
    top = _top(serve, [("guarded", guarded.url, new_token())],
               extra_args=("--upstream", open_site.url, "--upstream-token-file", str(tmp_path / "wrong.token")))
    tree = wait_for(lambda: (t := _glue(top)) and len(_sites(t)) == 2 and all(s["last_success"] or s.get("error")
                                                                               for s in t["sites"]) and t["hosts"] and t,
                    timeout=20, message="both upstreams pulled once, the union rebuilt")
    sites = _sites(tree)
    assert sites["guarded"]["state"] == "failing" and "HTTP 401" in sites["guarded"]["error"]
    assert "read token" in sites["guarded"]["error"]
    # the open site reads with any token or none: its host is there, under the name --upstream gives it
    name = open_site.url.removeprefix("http://")
    assert sites[name]["state"] == "ok" and [h["unique_id"] for h in tree["hosts"]] == ["o1.example.org"]
    assert tree["hosts"][0]["site"] == name
    assert top.get("/healthz").status == 200
    assert "refused the read token" in top.log.read_text()
    assert top.process is not None and top.process.poll() is None


def test_a_site_too_large_or_away_is_failing_with_the_reason(serve_app: ServerFactory) -> None:
    (site, _) = _site(serve_app, False)
    for i in range(3):
        site.report(f"big{i}.example.org", site.agent_token())
    top = _top(serve_app, [("big", site.url, None), ("away", f"http://127.0.0.1:{free_port()}", None)],
               max_body_bytes=2048)
    tree = wait_for(lambda: (t := _glue(top)) and all(s.get("error") for s in t["sites"]) and t, timeout=20,
                    message="both upstreams failing")
    sites = _sites(tree)
    assert "max_body_bytes" in sites["big"]["error"] and sites["away"]["state"] == "failing"
    assert tree["hosts"] == [] and not any(s["stale"] or s["last_success"] for s in tree["sites"])
    metrics = top.get("/metrics").body.decode()
    assert 'infosvc_federation_pulls_total{site="away",url="' in metrics and 'result="failed"} ' in metrics
    assert "infosvc_federation_site_last_success_timestamp_seconds{" not in metrics  # no good pull yet
    # the top's own hosts are a site of the union too: `local`, first
    top.report("own.example.org", top.agent_token())
    tree = wait_for(lambda: (t := _glue(top)) and t["hosts"] and t, message="the top's own host in the union")
    assert [(h["unique_id"], h["site"]) for h in tree["hosts"]] == [("own.example.org", "local")]
    assert tree["sites"][0] == {"name": "local", "url": None, "state": "ok", "stale": False, "last_success": None,
                                "hosts": 1}
    assert [c["unique_id"] for c in tree["clusters"]] == ["default"] and tree["clusters"][0]["site"] == "local"


def test_an_https_site_verified_with_its_ca_file(serve: ServerFactory, tmp_path: Path) -> None:
    from support.pki import make_ca, make_server_cert

    ca, ca_cert, ca_key = make_ca(tmp_path, "site-ca")
    cert = make_server_cert(tmp_path, ca_cert, ca_key)
    site = serve(extra_args=("--tls-cert", str(cert.cert), "--tls-key", str(cert.key)), ca_file=ca.cert)
    site.report("tls1.example.org", site.agent_token())
    top = serve(start=False)
    top.config_file.write_text("\n".join([
        "[federation]", "interval_seconds = 0.3", "timeout_seconds = 2",
        "[[federation.upstreams]]", f'url = "{site.url}"', 'name = "verified"', f'ca_file = "{ca.cert}"',
        "[[federation.upstreams]]", f'url = "{site.url.replace("127.0.0.1", "localhost")}/"', 'name = "system-cas"',
    ]) + "\n")
    top.start()
    # the union is rebuilt off the event loop after a pull: the sites' status can say so before it is in place
    tree = wait_for(lambda: (t := _glue(top)) and all(s["last_success"] or s.get("error") for s in t["sites"])
                    and t["hosts"] and t, timeout=20, message="both upstreams pulled once, the union rebuilt")
    sites = _sites(tree)
    assert sites["verified"]["state"] == "ok" and tree["hosts"][0]["unique_id"] == "tls1.example.org"
    # the same site, verified against the system's CAs, which did not sign its certificate
    assert sites["system-cas"]["state"] == "failing" and "certificate" in sites["system-cas"]["error"].lower()
