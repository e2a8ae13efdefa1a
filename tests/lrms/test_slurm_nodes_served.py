"""A real Slurm's nodes served as SSS Nodes by the real server (`[lrms] type = "slurm"`, against
tests/support/slurm.py's cluster): GET /v1/nodes, JSON and XML, lists each node no agent reports
after the agents' hosts with the figures sinfo gives in the same instant, its XML valid against
the SSS Node schema; its filters apply to them; a drained and a down node's State; the GPU node's
Resource; a node an agent reports is listed once, as the agent's document; GET /v1/nodes/{id}
serves one, and an unknown Id is still 404; the GLUE routes' filters choose them too."""

from __future__ import annotations

import time
from typing import Any

from lxml import etree

from infosvc.codec import safexml
from infosvc.codec.node_xml import parse_node
from support.server import Server, wait_for
from support.slurm import SlurmCluster, slurm  # noqa: F401  (the module's cluster)
from test_slurm_site import INTERVAL, site, sinfo  # noqa: F401  (the server reading it)


def listed(server: Server, query: str = "") -> dict[str, dict[str, Any]]:
    reply = server.get(f"/v1/nodes{query}")
    assert reply.status == 200, reply.body[:300]
    return {n["id"]: n for n in reply.json()}


def amounts(node: dict[str, Any], category: str, kind: str, name: str | None = None) -> list[float]:
    return [item["value"] for item in node.get(category, []) if item["kind"] == kind and item.get("name") == name]


def served(server: Server, slurm: SlurmCluster) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:  # noqa: F811
    """/v1/nodes and sinfo at one instant: read until sinfo agrees before and after the listing."""
    def agreeing() -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]] | None:
        before = sinfo(slurm)
        time.sleep(INTERVAL * 2.5)
        nodes = listed(server)
        return (nodes, before) if sinfo(slurm) == before else None
    return wait_for(agreeing, timeout=60, interval=0.1, message="a quiet instant of Slurm")


def test_each_slurm_node_is_an_sss_node_with_sinfos_figures(site: Server, slurm: SlurmCluster) -> None:  # noqa: F811
    job = slurm.sbatch("-p", "short", "-w", "c1", "-n", "2", "--wrap", "sleep 300")
    wait_for(lambda: sinfo(slurm)["c1"]["alloc_cpus"] == 2, timeout=30, message="the job running on c1")
    nodes, facts = served(site, slurm)
    assert list(nodes) == ["c1", "c2", "c3", "c4", "g1"] == list(facts)
    for name, fact in facts.items():
        node = nodes[name]
        assert amounts(node, "configured", "Processors") == [fact["cpus"]]
        assert amounts(node, "available", "Processors") == [fact["cpus"] - fact["alloc_cpus"]]
        assert amounts(node, "utilized", "Processors") == [fact["alloc_cpus"]]
        assert amounts(node, "configured", "Memory") == [fact["real_memory"]]
        assert amounts(node, "available", "Memory") == [fact["real_memory"] - fact["alloc_memory"]]
        assert node["features"] == fact["features"].split(",")
        assert (node["name"], node["arch"], node["opsys"]) == (name, fact["architecture"], "Linux")
        assert node["reported_at"] and node["life_cycle"] in ("Ready", "Paused")
    # CR_CPU: this Slurm allocates no memory (test_slurm_sss_nodes.py has a node with memory allocated)
    assert (facts["c1"]["alloc_cpus"], nodes["c1"]["state"]) == (2, "Busy")
    assert nodes["c2"]["state"] == "Idle"
    assert (nodes["c4"]["state"], nodes["c4"]["life_cycle"], nodes["c4"]["reason"]) == ("Idle", "Paused", "disk replaced")
    g1 = nodes["g1"]
    assert amounts(g1, "configured", "Resource", "GPU") == [2.0]  # gres gpu:2
    assert [r["type"] for r in g1["configured"] if r.get("name") == "GPU"] == ["gpu"]
    assert amounts(g1, "available", "Resource", "GPU") == [2.0]
    slurm.run("scancel", str(job))


def test_the_xml_is_schema_valid_and_one_node_is_served(site: Server, slurm: SlurmCluster) -> None:  # noqa: F811
    reply = site.get("/v1/nodes?format=xml")
    assert reply.status == 200 and reply.headers["content-type"].startswith("application/xml")
    root = safexml.parse(reply.body, what="Nodes")
    documents = [etree.tostring(node) for node in root]
    parsed = [parse_node(document) for document in documents]  # each validated against sss-node.xsd
    assert [n.id for n in parsed] == ["c1", "c2", "c3", "c4", "g1"]
    one = site.get("/v1/nodes/G1?format=xml")  # Ids are matched as host Ids are: lower case
    assert one.status == 200
    g1 = parse_node(one.body)
    assert [(r.value, r.type) for r in g1.configured.resources("GPU")] == [(2.0, "gpu")]
    assert site.get("/v1/nodes/c2").json()["id"] == "c2"
    missing = site.get("/v1/nodes/c9")
    assert missing.status == 404 and "c9" in missing.json()["error"]
    # a read of Slurm is not stored: a node no agent reports has no history (docs/slurm.md)
    assert site.get("/v1/nodes/c2/history").status == 404


def test_a_drained_and_a_down_nodes_state_and_the_filters(site: Server, slurm: SlurmCluster) -> None:  # noqa: F811
    slurm.drain("c3", "fan failure")
    slurm.down("c2", "power cut")
    try:
        nodes, facts = served(site, slurm)
        assert facts["c2"]["state"] == "down"
        assert (nodes["c2"]["state"], nodes["c2"]["life_cycle"], nodes["c2"]["reason"]) == \
            ("Offline", "Unreachable", "power cut")
        assert (nodes["c3"]["state"], nodes["c3"]["life_cycle"], nodes["c3"]["reason"]) == \
            ("Idle", "Paused", "fan failure")
        assert list(listed(site, "?state=Paused")) == ["c3", "c4"]
        assert list(listed(site, "?state=Unreachable&format=json")) == ["c2"]
        assert list(listed(site, "?feature=gpu")) == ["g1"]
        assert list(listed(site, "?nodes=c[1-3]&min_free_processors=1")) == ["c1"]
        assert listed(site, "?nodes=x[1-2]") == {}
        assert site.get("/v1/nodes?min_free_processors=-1").status == 400
        # the GLUE routes' filters choose Slurm's nodes as /v1/nodes's do
        assert [h["unique_id"] for h in site.get("/v1/glue/hosts?state=Paused").json()["hosts"]] == ["c3", "c4"]
        assert [h["unique_id"] for h in site.get("/v1/glue?state=Unreachable").json()["hosts"]] == ["c2"]
    finally:
        slurm.resume("c2")
        slurm.resume("c3")
    wait_for(lambda: listed(site)["c2"]["state"] == "Idle", timeout=30, message="c2 resumed")


def test_a_node_an_agent_reports_is_listed_once_as_the_agents(site: Server, slurm: SlurmCluster) -> None:  # noqa: F811
    site.report("c1", site.agent_token(), processors=16, memory_mb=1024, model="EPYC 7302")
    nodes = listed(site)
    assert list(nodes) == ["c1", "c2", "c3", "c4", "g1"]  # the agent's first, then Slurm's; none twice
    assert amounts(nodes["c1"], "configured", "Processors") == [16]  # the agent's document, not Slurm's 4
    assert amounts(site.get("/v1/nodes/c1").json(), "configured", "Processors") == [16]
    assert list(listed(site, "?nodes=c[1-2]")) == ["c1", "c2"]
    xml = site.get("/v1/nodes?format=xml").body
    assert xml.count(b"<Id>c1</Id>") == 1
