"""GET /v1/glue in the grid's formats on the real server, and `infosvc ldif`, the provider a resource
BDII runs: format=ldif (schema=1.3, 2.0, both), glue2-xml and glue2-json validated against the
vendored schemas, the host filters and a past view in those formats, the refusals of parameters
that do not fit, and the command's output and failures.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infosvc.codec import ldif
from support.server import Server, ServerFactory, free_port
from support.gridcheck import GLUE13, GLUE20, check_ldif, glue2_validator, xml_valid

SITE = """
[service]
information_service_url = "https://infosvc.example.org:8443"

[[clusters]]
id = "compute"
nodes = "cn[01-04]"

[[clusters]]
id = "bigmem"
nodes = "fat[1-2]"

[[computing_elements]]
id = "ce.example.org:8443/infosvc-long"
queue = "long"
clusters = ["compute", "bigmem"]
"""


@pytest.fixture(scope="module")
def site(module_serve_app: ServerFactory) -> Server:
    server = module_serve_app(start=False)
    server.config_file.write_text(SITE)
    server.start()
    for host in ("cn01", "cn02", "cn03"):
        server.report(host, server.agent_token(), memory_mb=4096)
    for host in ("fat1", "fat2"):
        server.report(host, server.agent_token(), memory_mb=262144, processors=64, model="EPYC 7302")
    return server


def get(server: Server, query: str, status: int = 200) -> bytes:
    reply = server.get(f"/v1/glue?{query}")
    assert reply.status == status, (reply.status, reply.body[:500])
    return reply.body


def test_ldif_of_each_schema(site: Server) -> None:
    reply = site.get("/v1/glue?format=ldif&schema=1.3")
    assert reply.status == 200 and reply.headers["content-type"].startswith("text/plain")
    g13 = check_ldif(reply.body.decode(), GLUE13)
    assert sum(dn.startswith("GlueCEUniqueID=") for dn in g13) == 1
    assert sum(dn.startswith("GlueSubClusterUniqueID=") for dn in g13) == 2
    ce = dict(g13["GlueCEUniqueID=ce.example.org:8443/infosvc-long,mds-vo-name=resource,o=grid"])
    assert ce["GlueCEStateStatus"] == "Production" and int(ce["GlueCEInfoTotalCPUs"]) == 3 * 4 + 2 * 64
    g2 = check_ldif(get(site, "format=ldif&schema=2.0").decode(), GLUE20)
    assert all(dn.endswith(",GLUE2GroupID=resource,o=glue") for dn in g2)
    ee = [dict(a) for a in g2.values() if ("objectClass", "GLUE2ExecutionEnvironment") in a]
    assert sorted(int(e["GLUE2ExecutionEnvironmentMainMemorySize"]) for e in ee) == [4096, 262144]
    both = ldif.parse(get(site, "format=ldif").decode())
    assert both.keys() == g13.keys() | g2.keys()


def test_base_entries_and_the_site_id_on_request(site: Server) -> None:
    plain = ldif.parse(get(site, "format=ldif").decode())
    assert "o=grid" not in plain and "o=glue" not in plain
    cluster = plain["GlueClusterUniqueID=compute,mds-vo-name=resource,o=grid"]
    assert ("GlueForeignKey", "GlueSiteUniqueID=infosvc.example.org") in cluster  # from the service URL
    named = ldif.parse(get(site, "format=ldif&base=1&site=EXAMPLE-SITE").decode())
    for dn in ("o=grid", "mds-vo-name=resource,o=grid", "o=glue", "GLUE2GroupID=resource,o=glue"):
        assert dn in named
    assert ("GlueForeignKey", "GlueSiteUniqueID=EXAMPLE-SITE") in named[
        "GlueClusterUniqueID=compute,mds-vo-name=resource,o=grid"]
    assert any(("GLUE2ServiceAdminDomainForeignKey", "EXAMPLE-SITE") in a for a in named.values())


def test_glue2_xml_and_json_answers_are_valid(site: Server) -> None:
    reply = site.get("/v1/glue?format=glue2-xml&site=EXAMPLE-SITE")
    assert reply.status == 200 and reply.headers["content-type"].startswith("application/xml")
    root = xml_valid(reply.body)
    assert root.findtext("{http://schemas.ogf.org/glue/2009/03/spec_2.0_r1}AdminDomain/"
                         "{http://schemas.ogf.org/glue/2009/03/spec_2.0_r1}ID") == "EXAMPLE-SITE"
    xml_valid(get(site, "format=glue2-xml&pretty=1"))
    document = json.loads(get(site, "format=glue2-json"))
    glue2_validator().validate(document)
    assert document["ComputingShare"][0]["MappingQueue"] == "long"
    json.loads(get(site, "format=glue2-json&pretty=1"))


def test_host_filters_and_a_past_view_in_grid_formats(site: Server) -> None:
    only = check_ldif(get(site, "format=ldif&schema=1.3&nodes=fat[1-2]").decode(), GLUE13)
    assert sum(dn.startswith("GlueSubClusterUniqueID=") for dn in only) == 1
    glue2_validator().validate(json.loads(get(site, "format=glue2-json&cluster=bigmem")))
    past = check_ldif(get(site, "format=ldif&schema=2.0&at=2100-01-01T00:00:00Z").decode(), GLUE20)
    assert any(("objectClass", "GLUE2ExecutionEnvironment") in a for a in past.values())


@pytest.mark.parametrize("query", ["format=ldif&schema=1.4", "format=json&schema=1.3", "format=xml&site=X",
                                   "format=ldif&base=yes", "format=ldif&site=no%20spaces",
                                   "format=glue2-json&schema=2.0", "format=glue2-xml&base=1", "format=ldap"])
def test_parameters_that_do_not_fit_are_refused(site: Server, query: str) -> None:
    reply = site.get(f"/v1/glue?{query}")
    assert reply.status == 400, (query, reply.body)
    assert reply.json()["detail"]["parameter"] in ("schema", "site", "base", "format")


def test_other_glue_routes_keep_their_formats(site: Server) -> None:
    assert site.get("/v1/glue/hosts?format=ldif").status == 400
    assert site.get("/v1/glue/clusters/compute?format=glue2-xml").status == 400
    assert site.get("/v1/glue?format=xml").body.startswith(b"<?xml")


def infosvc(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "infosvc", *args], capture_output=True, timeout=60)


def test_the_provider_command_prints_the_ldif(site: Server) -> None:
    done = infosvc("ldif", "--server", site.url, "--schema", "1.3", "--site", "EXAMPLE-SITE")
    assert done.returncode == 0, done.stderr
    entries = check_ldif(done.stdout.decode(), GLUE13)
    assert ("GlueForeignKey", "GlueSiteUniqueID=EXAMPLE-SITE") in entries[
        "GlueClusterUniqueID=bigmem,mds-vo-name=resource,o=grid"]
    both = infosvc("ldif", "--server", site.url, "--base")
    assert both.returncode == 0 and b"\ndn: o=glue\n" in both.stdout and b"\ndn: o=grid\n" in both.stdout


def test_the_provider_command_prints_nothing_when_it_fails(site: Server) -> None:
    gone = infosvc("ldif", "--server", f"http://127.0.0.1:{free_port()}")
    assert gone.returncode == 1 and gone.stdout == b"" and b"cannot reach" in gone.stderr
    bad = infosvc("ldif", "--server", site.url, "--site", "no spaces")
    assert bad.returncode == 2 and bad.stdout == b""


def test_the_provider_command_prints_its_last_ldif_while_the_server_is_away(site: Server, tmp_path: Path) -> None:
    # a review: bdii-update ignores a provider's exit status and deletes what its output lacks, so
    # a server restarting during a BDII update took the site off the grid until the next run
    import os
    import time

    cache = tmp_path / "infosvc.ldif"
    args = ("--schema", "1.3", "--site", "EXAMPLE-SITE", "--cache", str(cache))
    live = infosvc("ldif", "--server", site.url, *args)
    assert live.returncode == 0 and cache.read_bytes() == live.stdout and cache.stat().st_mode & 0o077 == 0
    away = f"http://127.0.0.1:{free_port()}"
    kept = infosvc("ldif", "--server", away, *args)
    assert kept.returncode == 0 and kept.stdout == live.stdout, kept.stderr
    assert b"cannot reach" in kept.stderr and b"the last LDIF read" in kept.stderr
    old = time.time() - 7200  # older than --max-age (an hour): nothing, as without a cache
    os.utime(cache, (old, old))
    stale = infosvc("ldif", "--server", away, *args)
    assert stale.returncode == 1 and stale.stdout == b"" and b"older than" in stale.stderr
    cache.unlink()
    cache.symlink_to(tmp_path / "elsewhere.ldif")  # never followed, written or read
    (tmp_path / "elsewhere.ldif").write_bytes(live.stdout)
    linked = infosvc("ldif", "--server", away, *args)
    assert linked.returncode == 1 and linked.stdout == b""


def test_the_provider_command_presents_its_read_token(serve_app: ServerFactory, tmp_path: Path) -> None:
    server = serve_app({"service": {"read_token_required": True}})
    server.report("cn01", server.agent_token())
    refused = infosvc("ldif", "--server", server.url, "--schema", "2.0")
    assert refused.returncode == 1 and refused.stdout == b"" and b"401" in refused.stderr
    token = tmp_path / "bdii.token"
    token.write_text(server.tokens["admin"] + "\n")
    done = infosvc("ldif", "--server", server.url, "--schema", "2.0", "--token-file", str(token))
    assert done.returncode == 0, done.stderr
    check_ldif(done.stdout.decode(), GLUE20)
    assert server.tokens["admin"].encode() not in done.stdout + done.stderr
    # a site configured for no grid: what its LDIF's comments say a client would miss, once each
    said = done.stderr.decode().splitlines()
    assert len(said) == 2 and all(line.startswith("infosvc ldif: warning: ") for line in said), said


@pytest.mark.parametrize("host_name", ["x\n\ndn: GlueCEUniqueID=evil,mds-vo-name=resource,o=grid\nobjectClass: GlueCE\n",
                                       "ce one.example.org", "ce\u202eexample.org"])
def test_a_site_id_taken_from_a_ce_s_host_name_is_a_site_id(serve_app: ServerFactory, host_name: str) -> None:
    # a review: with no information_service_url the site id is the first CE's host name, which
    # an upstream site (or the config) may give as any text; GLUE 1.3's first comment line wrote
    # it raw, and a newline in it added entries to the LDIF a top level's BDII reads
    server = serve_app(start=False)
    server.config_file.write_text(f'[[computing_elements]]\nid = "ce1"\nclusters = ["default"]\n'
                                  f'host_name = {json.dumps(host_name)}\n')
    server.start()
    server.report("node001", server.agent_token())
    text = get(server, "format=ldif&schema=1.3").decode()
    assert "evil" not in text.split("\n", 1)[0] and "\ndn: GlueCEUniqueID=evil," not in text
    assert text.startswith("# GLUE 1.3 of site infosvc by infosvc;"), text[:200]  # not a site id: the default
    check_ldif(text, GLUE13)
