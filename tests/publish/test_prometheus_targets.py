"""GET /v1/prometheus/targets: Prometheus HTTP service discovery over a real server.

The answer is what Prometheus's http_sd_configs reads: a JSON array of {"targets": [...],
"labels": {...}} with string label values, served as application/json.
"""

from __future__ import annotations

import re
from typing import Any

from support.server import ServerFactory, wait_for

PATH = "/v1/prometheus/targets"


def assert_http_sd(groups: Any) -> None:
    """The http_sd format, as Prometheus parses it (discovery/http/http.go: []*targetgroup.Group)."""
    assert isinstance(groups, list)
    for group in groups:
        assert set(group) == {"targets", "labels"}
        assert isinstance(group["targets"], list) and group["targets"]
        assert all(isinstance(t, str) and re.fullmatch(r"(\[[0-9a-f:]+\]|[^:\s]+):\d{1,5}", t) for t in group["targets"])
        assert all(isinstance(k, str) and re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", k) and isinstance(v, str)
                   for k, v in group["labels"].items())


def by_node(groups: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {g["labels"]["node"]: g for g in groups}


def test_live_hosts_are_targets_with_their_place_in_glue(serve_app: ServerFactory) -> None:
    server = serve_app()
    assert server.get(PATH).json() == []
    server.report("node002", server.agent_token())
    server.report("node001", server.agent_token())
    server.report("big01", server.agent_token(), processors=64, memory_mb=262144)
    assert server.admin("node002", "pause").status == 200

    reply = server.get(PATH)
    assert reply.status == 200 and reply.headers["content-type"].startswith("application/json")
    groups = reply.json()
    assert_http_sd(groups)
    assert [g["labels"]["node"] for g in groups] == ["big01", "node001", "node002"]  # sorted by Id

    glue_hosts = {h["unique_id"]: h for h in server.get("/v1/glue").json()["hosts"]}
    for node, group in by_node(groups).items():
        assert group["targets"] == [f"{node}:9100"]  # node_exporter's port by default
        assert group["labels"] == {"node": node, "subcluster": glue_hosts[node]["subcluster"], "cluster": "default",
                                   "__meta_infosvc_state": glue_hosts[node]["state"]}
    assert by_node(groups)["node002"]["labels"]["__meta_infosvc_state"] == "Paused"
    assert by_node(groups)["big01"]["labels"]["subcluster"] != by_node(groups)["node001"]["labels"]["subcluster"]


def test_exporter_port_and_clusters_from_the_config(serve_app: ServerFactory) -> None:
    server = serve_app(start=False)
    server.config_file.write_text('[prometheus]\nexporter_port = 9256\n\n'
                                  '[[clusters]]\nid = "gpu"\nnodes = "gpu[01-04]"\n\n[[clusters]]\nid = "compute"\n')
    server.start()
    server.report("gpu02", server.agent_token())
    server.report("cn7", server.agent_token())
    groups = by_node(server.get(PATH).json())
    assert groups["gpu02"]["targets"] == ["gpu02:9256"] and groups["gpu02"]["labels"]["cluster"] == "gpu"
    assert groups["cn7"]["targets"] == ["cn7:9256"] and groups["cn7"]["labels"]["cluster"] == "compute"


def test_pending_hosts_are_not_targets_until_approved(serve_app: ServerFactory) -> None:
    server = serve_app({"lifecycle": {"require_approval": True}})
    server.report("new01", server.agent_token())
    assert server.state_of("new01") == "Pending"
    assert server.get(PATH).json() == []
    assert server.admin("new01", "approve").status == 200
    (group,) = server.get(PATH).json()
    assert group["targets"] == ["new01:9100"] and group["labels"]["__meta_infosvc_state"] == "Ready"


def test_unreachable_hosts_stay_targets(serve_app: ServerFactory) -> None:
    """Prometheus marks them down (up == 0) itself; dropping them would hide that from alerts."""
    server = serve_app({"lifecycle": {"heartbeat_seconds": 0.2, "missed_heartbeats": 1}})
    server.report("gone01", server.agent_token())
    wait_for(lambda: server.state_of("gone01") == "Unreachable", message="gone01 Unreachable")
    (group,) = server.get(PATH).json()
    assert group["targets"] == ["gone01:9100"]
    assert group["labels"]["__meta_infosvc_state"] == "Unreachable"


def test_reads_need_a_token_when_the_config_says_so(serve_app: ServerFactory) -> None:
    server = serve_app({"service": {"read_token_required": True}})
    assert server.get(PATH).is_error(401)
    reply = server.get(PATH, token=server.tokens["admin"])
    assert reply.status == 200 and reply.json() == []


def test_ipv6_literal_ids_are_bracketed() -> None:
    from infosvc.publish.targets import address

    assert address("node001", 9100) == "node001:9100"
    assert address("fd00::17", 9100) == "[fd00::17]:9100"
