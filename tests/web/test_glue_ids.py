"""GLUE UniqueIDs with a slash in them on GET /v1/glue/{kind}/{id}, on the real server.

A CE's UniqueID is host:port/jobmanager-queue, so it holds a slash: the route takes the rest of
the path as the id, written as is or with the slash as %2F. The routes beside it keep theirs:
/v1/glue/hosts is still the listing, and an id with a slash on a route whose ids cannot hold one
is still a 404.
"""

from __future__ import annotations

import pytest

from support.server import Server, ServerFactory

CE = "ce.example.org:2119/jobmanager-pbs-long"
CLUSTER = "site/compute"  # a configured cluster id may hold a slash too

SITE = f"""
[[clusters]]
id = "{CLUSTER}"
nodes = "cn[01-04]"

[[computing_elements]]
id = "{CE}"
queue = "long"
clusters = ["{CLUSTER}"]
"""


@pytest.fixture(scope="module")
def site(module_serve_app: ServerFactory) -> Server:
    server = module_serve_app(start=False)
    server.config_file.write_text(SITE)
    server.start()
    server.report("cn01", server.agent_token())
    return server


@pytest.mark.parametrize("path", [CE, CE.replace("/", "%2F"), CE.replace("/", "%2f"),
                                  CE.replace(":", "%3A").replace("/", "%2F")])
def test_a_computing_element_with_a_slash_in_its_id(site: Server, path: str) -> None:
    reply = site.get(f"/v1/glue/computing-elements/{path}")
    assert reply.status == 200, (path, reply.status, reply.body)
    assert reply.json()["unique_id"] == CE
    xml = site.get(f"/v1/glue/computing-elements/{path}?format=xml")
    assert xml.status == 200 and xml.headers["content-type"].startswith("application/xml"), xml.body
    assert f"<UniqueID>{CE}</UniqueID>".encode() in xml.body


def test_a_cluster_with_a_slash_in_its_id(site: Server) -> None:
    for path in (CLUSTER, CLUSTER.replace("/", "%2F")):
        reply = site.get(f"/v1/glue/clusters/{path}")
        assert reply.status == 200, (path, reply.status, reply.body)
        assert reply.json()["unique_id"] == CLUSTER


def test_an_unknown_id_with_a_slash_is_a_404_naming_it(site: Server) -> None:
    reply = site.get(f"/v1/glue/computing-elements/{CE}/more")
    assert reply.is_error(404), reply.body
    assert f"{CE}/more" in reply.json()["error"]
    assert site.get("/v1/glue/computing-elements/").is_error(404)  # no id at all: no route
    assert site.get("/v1/glue/no-such-kind/a/b").is_error(404)


def test_the_host_listing_still_wins(site: Server) -> None:
    listing = site.get("/v1/glue/hosts?state=Ready")  # the listing's filters, not a host "hosts"
    assert listing.status == 200, listing.body
    assert [host["unique_id"] for host in listing.json()["hosts"]] == ["cn01"]
    assert site.get("/v1/glue/hosts").json() == site.get("/v1/glue/hosts?nodes=cn[01-04]").json()
    host = site.get("/v1/glue/hosts/CN01")  # one host, its Id canonical as on every route
    assert host.status == 200 and host.json()["unique_id"] == "cn01", host.body
    assert site.get("/v1/glue/hosts/cn01/extra").is_error(404)


def test_other_routes_with_an_id_keep_one_segment(site: Server) -> None:
    assert site.get("/v1/nodes/cn01").status == 200
    assert site.get("/v1/nodes/cn01/extra").is_error(404)
    assert site.get("/v1/nodes/cn01%2Fextra").is_error(404)
    assert site.get("/v1/jobs/1/extra").is_error(404)
    paused = site.admin("cn01", "pause")
    assert paused.status == 200, paused.body
    assert site.admin("cn01", "resume").status == 200
    assert site.admin("cn01/extra", "pause").is_error(404)
