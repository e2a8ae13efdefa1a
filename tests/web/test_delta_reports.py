"""Delta reports against a real server: a whole report names the base its deltas may build on, a
delta updates the host as if the whole sample had come, one of a sample the server does not hold
is a 409 that stores nothing, and the base outlives a restart; the history and the site at a past
time show what each delta said, and the bounded history keeps the whole report its deltas need."""

from __future__ import annotations

import copy
from dataclasses import replace

from support.documents import make_node
from support.server import ServerFactory
from infosvc.codec.node_xml import node_to_xml
from infosvc.model.node import Consumable, Extension, Node
from infosvc.model.nodedelta import delta_of

HOST = "d1.example.org"


def whole(sample: str, free_memory: float = 4096.0, load: float = 0.5) -> Node:
    node = make_node(HOST, free_memory_mb=free_memory)
    node.extensions[:0] = [Extension("SampleTime", "2026-11-27T00:00:00Z", "Agent"),
                           Extension("SampleId", sample, "Agent")]
    node.utilized.add(Consumable("Resource", load, metric="Average", name="Load", type="1min"))
    return node


def delta(base: Node, sample: str, free_memory: float, load: float = 0.5) -> bytes:
    node = copy.deepcopy(base)  # its parts are frozen: replaced, never changed
    node.extensions[1] = replace(node.extensions[1], value=sample)
    node.available.items = [replace(i, value=free_memory) if i.kind == "Memory" else i for i in node.available]
    node.utilized.items = [replace(i, value=load) if i.name == "Load" else i for i in node.utilized]
    said = delta_of(base, node)
    assert said is not None
    return node_to_xml(said)


def free_memory_of(reply_json: dict) -> float:
    return next(item["value"] for item in reply_json["available"] if item["kind"] == "Memory")


def test_a_delta_updates_the_host_and_a_stale_one_is_a_conflict(serve_app: ServerFactory) -> None:
    server = serve_app({}, agents=1)
    token = server.agent_token()
    base = whole("run-1")
    first = server.post_node(node_to_xml(base), token)
    assert first.status == 200 and first.json()["base"] == "run-1"

    reply = server.post_node(delta(base, "run-2", 1000.0, load=1.5), token)
    assert reply.status == 200, reply.body
    assert reply.json()["base"] == "run-1"  # deltas still build on the whole one
    node = server.get(f"/v1/nodes/{HOST}").json()
    assert free_memory_of(node) == 1000.0
    assert node["name"] == "d1" and node["opsys"] == "Linux"  # the rest is the base's
    assert {(e["name"], e["value"]) for e in node["extensions"] if e.get("type") == "Agent"} == {
        ("SampleTime", "2026-11-27T00:00:00Z"), ("SampleId", "run-2")}

    # the same delta again (its answer lost): acknowledged, stored once
    again = server.post_node(delta(base, "run-2", 1000.0, load=1.5), token)
    assert again.status == 200
    # a delta of a sample the server does not hold: 409, nothing stored
    stale = server.post_node(delta(whole("run-0"), "run-3", 5.0), token)
    assert stale.status == 409, stale.body
    assert stale.json()["error"].startswith(f"host {HOST!r}: no sample 'run-0' held")
    assert "whole document" in stale.json()["detail"]
    assert free_memory_of(server.get(f"/v1/nodes/{HOST}").json()) == 1000.0
    assert [row[0] for row in server.sql("SELECT base IS NOT NULL FROM reports ORDER BY seq")] == [0, 1]
    metrics = server.get("/metrics").body.decode()
    assert 'infosvc_reports_rejected_total{reason="no_base"} 1.0' in metrics

    # a whole report makes a new base: deltas of the old one are refused from then on
    assert server.post_node(node_to_xml(whole("run-4", free_memory=2000.0)), token).json()["base"] == "run-4"
    assert server.post_node(delta(base, "run-5", 1.0), token).status == 409


def test_a_delta_of_a_host_never_seen_is_a_conflict(serve_app: ServerFactory) -> None:
    server = serve_app({}, agents=1)
    reply = server.post_node(delta(whole("run-1"), "run-2", 1.0), server.agent_token())
    assert reply.status == 409
    assert server.node_ids() == []
    assert server.row_counts()["reports"] == 0


def test_a_delta_that_says_a_static_fact_is_refused(serve_app: ServerFactory) -> None:
    server = serve_app({}, agents=1)
    token = server.agent_token()
    base = whole("run-1")
    server.post_node(node_to_xml(base), token)
    bad = delta(base, "run-2", 1.0).replace(b"<State>", b"<Opsys>Windows</Opsys><State>")
    if b"<State>" not in bad:
        bad = bad.replace(b"<Extension", b"<Opsys>Windows</Opsys><Extension", 1)
    reply = server.post_node(bad, token)
    assert reply.status == 400, reply.body
    assert "Opsys" in reply.json()["error"] and "whole document" in reply.json()["error"]


def test_the_base_outlives_a_restart_and_history_says_each_delta_whole(serve: ServerFactory) -> None:
    server = serve({"store": {"history_per_host": 3}}, agents=1)
    token = server.agent_token()
    base = whole("run-1", free_memory=4096.0)
    assert server.post_node(node_to_xml(base), token).status == 200
    for number, free in enumerate((3000.0, 2000.0, 1000.0, 500.0), start=2):
        assert server.post_node(delta(base, f"run-{number}", free), token).status == 200
    server.restart()
    node = server.get(f"/v1/nodes/{HOST}").json()
    assert free_memory_of(node) == 500.0  # the newest delta, applied to its base again at start
    assert server.post_node(delta(base, "run-6", 250.0), token).status == 200  # the base is still held

    # history_per_host 3: the three newest, and the whole report they build on, which is older
    assert [row[0] for row in server.sql("SELECT base IS NULL FROM reports ORDER BY seq")] == [1, 0, 0, 0]
    reports = server.get(f"/v1/nodes/{HOST}/history").json()["reports"]  # oldest first
    assert [free_memory_of(report["node"]) for report in reports] == [4096.0, 1000.0, 500.0, 250.0]
    # and the site as it was published at the newest report's time
    glue = server.get("/v1/glue?at=" + "9" * 10)
    assert glue.status == 200, glue.body
